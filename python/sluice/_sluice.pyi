"""Type stubs of sluice's native module (re-exported by ``sluice``)."""

from os import PathLike
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

_Path = Union[str, PathLike[str]]
_LinkType = Union[str, int]
_Frames = Union[Sequence[bytes], bytes, bytearray, memoryview, npt.NDArray[np.uint8], "Batch"]
_IntArray = Union[Sequence[int], npt.NDArray[np.integer[Any]]]
_Filters = Union[Mapping[str, str], Sequence[Tuple[str, str]], "FilterSet"]
_Ends = Tuple[int, int, Optional[bytes], Optional[bytes], bool]

class FilterError(ValueError):
    """A filter (or flow specification) that does not compile."""

    message: str
    text: str
    line: Optional[int]
    column: Optional[int]
    offset: Optional[int]
    name: Optional[str]

class CaptureError(ValueError):
    """A capture file that is not pcap or pcapng, or is truncated or corrupt."""

    message: str
    path: str
    offset: int

class Filter:
    """A filter compiled for a link type."""

    def __init__(
        self,
        text: str,
        linktype: Optional[_LinkType] = "EN10MB",
        snaplen: int = 262144,
        optimize: bool = True,
        language: Optional[str] = None,
    ) -> None: ...
    def matches(self, frame: bytes, wirelen: Optional[int] = None) -> bool: ...
    def run(self, frame: bytes, wirelen: Optional[int] = None) -> int: ...
    def verdicts(
        self,
        frames: _Frames,
        offsets: Optional[_IntArray] = None,
        wirelens: Optional[_IntArray] = None,
    ) -> npt.NDArray[np.bool_]: ...
    def program(self, format: str = "d") -> str: ...
    @property
    def expression(self) -> str: ...
    @property
    def language(self) -> str: ...
    @property
    def linktype(self) -> str: ...
    @property
    def snaplen(self) -> int: ...
    @property
    def optimize(self) -> bool: ...
    @property
    def native(self) -> bool: ...

class Classifier:
    """Many filters merged into one classifier."""

    def __init__(
        self, linktype: Optional[_LinkType] = "EN10MB", first_match: bool = False, snaplen: int = 262144
    ) -> None: ...
    def insert(self, filter: Union[str, Filter], priority: int = 0) -> int: ...
    def remove(self, id: int) -> None: ...
    def classify(self, frame: bytes, wirelen: Optional[int] = None) -> Union[List[int], Optional[int]]: ...
    def classify_batch(
        self,
        frames: _Frames,
        offsets: Optional[_IntArray] = None,
        wirelens: Optional[_IntArray] = None,
    ) -> Union[npt.NDArray[np.int64], Tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]]: ...
    def ids(self) -> List[int]: ...
    def __len__(self) -> int: ...
    @property
    def first_match(self) -> bool: ...
    @property
    def linktype(self) -> str: ...

class Batch:
    """Frames read together, in one buffer with offsets."""

    data: bytes
    offsets: npt.NDArray[np.int64]
    wirelens: npt.NDArray[np.int64]
    timestamps_ns: npt.NDArray[np.int64]
    linktypes: npt.NDArray[np.uint16]
    def __len__(self) -> int: ...

class Reader:
    """A pcap or pcapng file, read packet by packet."""

    def __iter__(self) -> Iterator[Tuple[float, bytes]]: ...
    def __next__(self) -> Tuple[float, bytes]: ...
    def read_batch(self, max_packets: int = 65536) -> Batch: ...
    def datalink(self) -> Optional[int]: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Reader": ...
    def __exit__(self, *exc: Any) -> bool: ...
    @property
    def linktype(self) -> Optional[int]: ...
    @property
    def format(self) -> str: ...
    @property
    def snaplen(self) -> Optional[int]: ...
    @property
    def nanoseconds(self) -> bool: ...
    @property
    def path(self) -> str: ...

def open(path: _Path) -> Reader: ...

class FilterSet:
    """A named filter set, compiled once per link type met."""

    def __init__(self, filters: _Filters, first_match: bool = False) -> None: ...
    def compile(self, linktype: Optional[_LinkType] = None) -> None: ...
    def to_dict(self) -> Dict[str, str]: ...
    def __len__(self) -> int: ...
    @property
    def names(self) -> List[str]: ...
    @property
    def first_match(self) -> bool: ...

def split(
    path: _Path,
    filters: _Filters,
    out_dir: Optional[_Path] = None,
    count: bool = False,
    first_match: bool = False,
) -> Dict[str, int]: ...
def split_range(
    path: _Path,
    filters: FilterSet,
    start: int,
    end: int,
    resume: Optional[bytes] = None,
    out_dir: Optional[_Path] = None,
    suffix: str = "",
) -> Dict[str, Any]: ...
def verify_ranges(ends: Sequence[_Ends]) -> Optional[Tuple[Any, ...]]: ...

class FlowGroup:
    """Flows sharing one packet buffer and their common instances."""

    def __init__(
        self,
        slots: int = 1024,
        slot_bytes: int = 65535,
        preference: str = "srp",
        policy: Optional[str] = None,
        every: int = 64,
    ) -> None: ...
    def flow(self, spec: str) -> "Flow": ...
    def run(self) -> Dict[str, int]: ...
    def dot(self) -> str: ...

class Flow:
    """One FFPF flow."""

    def __init__(
        self,
        spec: str,
        slots: int = 1024,
        slot_bytes: int = 65535,
        preference: str = "srp",
        policy: Optional[str] = None,
    ) -> None: ...
    def run(self) -> Dict[str, Any]: ...
    def report(self) -> Dict[str, Any]: ...
    @property
    def spec(self) -> str: ...
