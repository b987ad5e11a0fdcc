//! `sluice exec -- CMD ARGS…`: runs a program with sluice's libpcap in
//! place of the system's (as `torsocks` runs one over Tor): the library
//! is found, linked as `libpcap.so.0.8` and `libpcap.so.1` in a directory
//! of its own, and that directory goes first in `LD_LIBRARY_PATH`.
//!
//! Where the library is looked for, in order: `--lib`, `$SLUICE_LIBPCAP`,
//! beside the `sluice` executable (`target/release/libpcap.so` in a build
//! tree, or `deps/libpcap.so` under it), then `../lib/sluice/` beside it
//! (`/usr/lib/sluice/` for the Debian package's `/usr/bin/sluice`,
//! `~/.cargo/lib/sluice/` for `cargo install`'s `~/.cargo/bin/sluice`
//! after `scripts/install-libpcap.sh --prefix ~/.cargo`), then
//! `/usr/local/lib/sluice/` and `/usr/lib/sluice/` (where
//! `scripts/install-libpcap.sh` and the Debian package put it).

use super::Fail;
use clap::Args;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `sluice exec`'s arguments.
#[derive(Args, Debug)]
pub struct ExecArgs {
    /// The library to use (default: found beside sluice or installed).
    #[arg(long, value_name = "PATH")]
    lib: Option<PathBuf>,
    /// Print the directory to put in LD_LIBRARY_PATH and exit.
    #[arg(long)]
    print_dir: bool,
    /// The program and its arguments (after `--`).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<String>,
}

/// The names programs load libpcap by.
const SONAMES: &[&str] = &["libpcap.so.0.8", "libpcap.so.1"];

/// The library file: the first candidate that exists.
fn find_library(explicit: Option<&Path>) -> Result<PathBuf, Fail> {
    if let Some(p) = explicit {
        return if p.is_file() {
            Ok(p.to_path_buf())
        } else {
            Err(Fail(format!("{}: no such library", p.display())))
        };
    }
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("SLUICE_LIBPCAP") {
        candidates.push(p.into());
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        candidates.push(dir.join("libpcap.so"));
        // A build tree where only the test build made it.
        candidates.push(dir.join("deps/libpcap.so"));
        candidates.push(dir.join("../lib/sluice/libpcap.so.0.8"));
    }
    candidates.push("/usr/local/lib/sluice/libpcap.so.0.8".into());
    candidates.push("/usr/lib/sluice/libpcap.so.0.8".into());
    candidates.into_iter().find(|p| p.is_file()).ok_or_else(|| {
        Fail(
            "sluice's libpcap was not found: build it (cargo build --release builds it beside \
             sluice), install it (the Debian package, or scripts/install-libpcap.sh --prefix \
             DIR for DIR/bin/sluice), or name it with --lib"
                .into(),
        )
    })
}

/// A directory holding the library under every soname: its own directory
/// when it is installed that way, else `sluice-libpcap/` beside it (or in
/// the temporary directory when that is not writable).
fn library_dir(lib: &Path) -> Result<PathBuf, Fail> {
    let lib = lib
        .canonicalize()
        .map_err(|e| Fail(format!("{}: {}", lib.display(), super::io_msg(&e))))?;
    let home = lib.parent().map(Path::to_path_buf).unwrap_or_default();
    if SONAMES.iter().all(|n| same_file(&home.join(n), &lib)) {
        return Ok(home);
    }
    let uid = std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
        .unwrap_or(0);
    let tries = [
        home.join("sluice-libpcap"),
        std::env::temp_dir().join(format!("sluice-libpcap-{uid}")),
    ];
    let mut last = None;
    for dir in tries {
        match link_into(&dir, &lib) {
            Ok(()) => return Ok(dir),
            Err(e) => last = Some(format!("{}: {}", dir.display(), super::io_msg(&e))),
        }
    }
    Err(Fail(format!(
        "cannot make a directory for the library: {}",
        last.unwrap_or_default()
    )))
}

fn same_file(a: &Path, b: &Path) -> bool {
    a.canonicalize().is_ok_and(|a| a == b)
}

/// Makes `dir/SONAME → lib` for every soname (replacing stale links).
fn link_into(dir: &Path, lib: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for name in SONAMES {
        let link = dir.join(name);
        if same_file(&link, lib) {
            continue;
        }
        let tmp = dir.join(format!(".{name}.{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(lib, &tmp)?;
        std::fs::rename(&tmp, &link)?;
    }
    Ok(())
}

/// The directory to put first in `LD_LIBRARY_PATH` for a program to
/// load sluice's libpcap, if the library is found (`sluice filter` runs
/// tcpdump on it).
pub fn library_path() -> Option<PathBuf> {
    library_dir(&find_library(None).ok()?).ok()
}

/// Runs `sluice exec`: replaces this process with the command.
pub fn run(args: ExecArgs) -> Result<(), Fail> {
    let lib = find_library(args.lib.as_deref())?;
    let dir = library_dir(&lib)?;
    if args.print_dir {
        return super::print_out(&format!("{}\n", dir.display()));
    }
    let Some((program, rest)) = args.command.split_first() else {
        super::usage("exec needs a command: sluice exec -- tcpdump -r file.pcap");
    };
    let mut path = dir.as_os_str().to_os_string();
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|o| !o.is_empty()) {
        path.push(":");
        path.push(old);
    }
    let err = Command::new(program)
        .args(rest)
        .env("LD_LIBRARY_PATH", path)
        .exec();
    // exec returns only on failure; status 127/126 as env(1) gives.
    eprintln!("sluice: cannot run {program}: {}", super::io_msg(&err));
    let code = if err.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    };
    std::process::exit(code);
}
