//! FPL (FFPF, Bos et al. 2004, §3.3): the stateful filter language with
//! bounded loops, registers and per-filter memory.
//!
//! This crate parses and checks FPL-2 programs ([`Program::compile`]) and
//! runs them with the reference interpreter ([`Program::run`]);
//! `sluice_native::fpl::NativeFpl` compiles the same checked program to
//! machine code with the same meaning.
//!
//! # The language
//!
//! ```text
//! // count TCP packets per flow (Figure 6)
//! IF (PKT.IP_PROTO == PROTO_TCP) THEN
//!     R[0] = HASH(26, 12, 256);    // IP addresses and ports
//!     MEM[R[0]]++;
//! FI
//! ```
//!
//! - Statements: `IF e THEN … ELSE … FI`, `FOR (R[i] = a; R[i] < b; R[i]++) … ROF`
//!   with `BREAK`, assignments `=`, `+=`, `-=`, `*=`, `/=`, `%=`, `<<=`,
//!   `>>=`, `&=`, `^=`, `|=` and `++`/`--` to `R[n]` or `MEM[i]`,
//!   `RETURN e;`, and `EXTERN(...)` calls; simple statements end in `;`.
//!   Keywords and macro names may be written in any case; `//` and `/* */`
//!   are comments.
//! - Values are unsigned 32-bit; the operators are C's (see [`ir::BinOp`]).
//! - `R[0]` … `R[31]`: registers; `MEM[i]`: the filter's MBuf, kept across
//!   packets (the registers are kept there too, after the MEM words).
//! - `PKT.B[off]`, `PKT.W[off]`, `PKT.DW[off]`: 8, 16, 32-bit big-endian
//!   reads at any computed offset; `PKT.B[n].U1[m]` is bit `m` of byte `n`
//!   and `PKT.W[n].U8[m]` byte `m` of the word (`U1`, `U4`, `U8`, `U16`,
//!   counted from the most significant end). `PKT.IP_PROTO`, `PKT.TCP_DPORT`
//!   and the other [`MACROS`] name fields of Ethernet/IPv4 frames;
//!   `PROTO_TCP`, `TRUE` and the other [`CONSTANTS`] name numbers.
//! - `HASH(start, len, size)`: [`hash`] of `len` packet bytes, modulo `size`.
//! - `EXTERN(name, in, out)`: calls a registered [`Externs`] function with
//!   `MEM[in ..]` as input and `MEM[out ..]` as output; its value is the
//!   function's result.
//! - `DECLARE MEM[n];` at the top sets the MBuf size in words.
//!
//! # What is checked when compiling
//!
//! A program compiles only if it cannot run unbounded or step outside its
//! memory: every FOR counts a register by a constant step towards a limit
//! and gets a bound on its iterations; the total work of a run is bounded
//! ([`Limits::max_work`]); constant MEM indices and EXTERN ranges lie inside
//! the MBuf. Errors name the line and column.
//!
//! # What is checked when running
//!
//! Computed MEM indices the compiler cannot prove in range are compared
//! with the MBuf size; packet reads with the captured length. A failed
//! check, a division by zero, or a loop about to exceed its bound
//! **aborts** the run: the result is 0 (the packet is not interesting) and
//! MBuf writes made before stay. A program that ends without `RETURN`
//! returns 0. See [`ir`] for the exact meaning.
//!
//! ```
//! use sluice_fpl::{Externs, Program};
//! let p = Program::compile("IF PKT.B[0] == 0x45 THEN MEM[0]++; RETURN 1; FI RETURN 0;", &Externs::new()).unwrap();
//! let mut mem = vec![0; p.mem_words()];
//! assert_eq!(p.run(&[0x45], &mut mem), 1);
//! assert_eq!(p.run(&[], &mut mem), 0); // PKT.B[0] is past the end: abort
//! assert_eq!(mem[0], 1);
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod check;
mod externs;
mod interp;
pub mod ir;
mod lex;
mod parse;

use std::fmt;

pub use check::{DEFAULT_MEM_WORDS, MAX_HASH_LEN, MAX_MEM_WORDS, MAX_REGS};
pub use externs::{rtsp_dyn_port, ExternDef, ExternError, ExternFn, Externs, MAX_EXTERN_WORDS};
pub use interp::hash;
pub use parse::{CONSTANTS, MACROS, MAX_DEPTH};

/// A compile error, with the line and column (from 1) where it was found.
///
/// ```
/// let e = sluice_fpl::Program::compile("R[0] = MEM[0] +;", &sluice_fpl::Externs::new()).unwrap_err();
/// assert_eq!((e.line, e.col), (1, 16));
/// assert!(e.to_string().starts_with("line 1, column 16: "));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {col}: {message}")]
pub struct Error {
    /// Line, from 1.
    pub line: u32,
    /// Column in characters, from 1.
    pub col: u32,
    /// What is wrong.
    pub message: String,
}

impl Error {
    pub(crate) fn new(line: u32, col: u32, message: impl Into<String>) -> Error {
        Error {
            line,
            col,
            message: message.into(),
        }
    }
}

/// Limits the compiler enforces.
///
/// ```
/// use sluice_fpl::{Externs, Limits, Program};
/// let l = Limits { max_work: 100, ..Limits::default() };
/// let src = "FOR (R[0] = 0; R[0] < 1000; R[0]++) MEM[0]++; ROF";
/// let e = Program::compile_with(src, &Externs::new(), &l).unwrap_err();
/// assert!(e.message.contains("more than the limit of 100"), "{e}");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The MBuf size in words for MEM (the registers come on top); when
    /// `None`, the program's `DECLARE MEM[n]`, else inferred.
    pub mem_words: Option<usize>,
    /// The most work one run may take, counted in expression nodes and
    /// statements, loops multiplied by their bounds, HASH by its length.
    pub max_work: u64,
}

impl Default for Limits {
    /// No MBuf size, a work limit of 1,000,000.
    fn default() -> Limits {
        Limits {
            mem_words: None,
            max_work: 1_000_000,
        }
    }
}

/// A checked, compiled FPL program.
///
/// ```
/// use sluice_fpl::{Externs, Program};
/// let p = Program::compile("MEM[3] += PKT.W[0]; RETURN MEM[3];", &Externs::new()).unwrap();
/// assert_eq!((p.mem_size(), p.regs(), p.mem_words()), (4, 0, 4));
/// let mut mem = vec![0; 4];
/// p.run(&[0, 5], &mut mem);
/// assert_eq!(p.run(&[0, 5], &mut mem), 10);
/// ```
#[derive(Clone)]
pub struct Program {
    body: Vec<ir::Stmt>,
    mem_size: usize,
    regs: usize,
    externs: Vec<ExternDef>,
    work: u64,
}

impl fmt::Debug for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Program")
            .field("mem_size", &self.mem_size)
            .field("regs", &self.regs)
            .field("externs", &self.externs)
            .field("work", &self.work)
            .finish_non_exhaustive()
    }
}

impl Program {
    /// Parse and check `src` against the registered `externs`, with the
    /// default [`Limits`].
    ///
    /// ```
    /// use sluice_fpl::{Externs, Program};
    /// assert!(Program::compile("RETURN PKT.TCP_DPORT == 80;", &Externs::new()).is_ok());
    /// let e = Program::compile("DECLARE MEM[4];\nMEM[4] = 1;", &Externs::new()).unwrap_err();
    /// assert_eq!((e.line, e.col), (2, 5));
    /// ```
    pub fn compile(src: &str, externs: &Externs) -> Result<Program, Error> {
        Program::compile_with(src, externs, &Limits::default())
    }

    /// [`Program::compile`] with other limits (or an MBuf size given by the caller).
    ///
    /// ```
    /// use sluice_fpl::{Externs, Limits, Program};
    /// let l = Limits { mem_words: Some(16), ..Limits::default() };
    /// let p = Program::compile_with("MEM[R[0]] = 1;", &Externs::new(), &l).unwrap();
    /// assert_eq!(p.mem_words(), 17); // 16 MEM words and R[0]
    /// ```
    pub fn compile_with(src: &str, externs: &Externs, limits: &Limits) -> Result<Program, Error> {
        let ast = parse::parse(src)?;
        let c = check::check(ast, externs, limits)?;
        Ok(Program {
            body: c.body,
            mem_size: c.mem_size,
            regs: c.regs,
            externs: c.externs,
            work: c.work,
        })
    }

    /// The MBuf the program needs, in `u32` words: the MEM words then the
    /// registers. [`Program::run`] takes at least this many.
    ///
    /// ```
    /// let p = sluice_fpl::Program::compile("R[2] = MEM[7];", &sluice_fpl::Externs::new()).unwrap();
    /// assert_eq!(p.mem_words(), 8 + 3);
    /// ```
    pub fn mem_words(&self) -> usize {
        self.mem_size + self.regs
    }

    /// How many MEM words the program indexes (`MEM[0 .. mem_size]`).
    ///
    /// ```
    /// let p = sluice_fpl::Program::compile("MEM[HASH(0, 4, 100)]++;", &sluice_fpl::Externs::new()).unwrap();
    /// assert_eq!(p.mem_size(), 100);
    /// ```
    pub fn mem_size(&self) -> usize {
        self.mem_size
    }

    /// Where the registers start in the MBuf: `R[n]` is `mem[reg_base() + n]`.
    ///
    /// ```
    /// let p = sluice_fpl::Program::compile("R[1] = 5; MEM[1] = 2;", &sluice_fpl::Externs::new()).unwrap();
    /// let mut mem = vec![0; p.mem_words()];
    /// p.run(&[], &mut mem);
    /// assert_eq!(mem[p.reg_base() + 1], 5);
    /// ```
    pub fn reg_base(&self) -> usize {
        self.mem_size
    }

    /// How many registers the program uses (`R[0 .. regs]`).
    ///
    /// ```
    /// let p = sluice_fpl::Program::compile("R[4] = 1;", &sluice_fpl::Externs::new()).unwrap();
    /// assert_eq!(p.regs(), 5);
    /// ```
    pub fn regs(&self) -> usize {
        self.regs
    }

    /// The compiler's bound on the work of one run (see [`Limits::max_work`]).
    ///
    /// ```
    /// let p = sluice_fpl::Program::compile("RETURN 1;", &sluice_fpl::Externs::new()).unwrap();
    /// assert_eq!(p.work(), 2);
    /// ```
    pub fn work(&self) -> u64 {
        self.work
    }

    /// The checked program (for back ends).
    ///
    /// ```
    /// let p = sluice_fpl::Program::compile("", &sluice_fpl::Externs::new()).unwrap();
    /// assert!(p.body().is_empty());
    /// ```
    pub fn body(&self) -> &[ir::Stmt] {
        &self.body
    }

    /// The external functions the program calls; [`ir::Expr::Extern`]'s
    /// `func` indexes this list.
    ///
    /// ```
    /// use sluice_fpl::{Externs, Program};
    /// let p = Program::compile("RETURN EXTERN(\"GetDynTCPDPortFromRTSP\", 0, 0);", &Externs::builtin()).unwrap();
    /// assert_eq!(p.externs()[0].name, "GetDynTCPDPortFromRTSP");
    /// ```
    pub fn externs(&self) -> &[ExternDef] {
        &self.externs
    }

    /// Run the program on one packet with its MBuf `mem` (kept across
    /// packets; start with zeros): the `RETURN` value, or 0 if the run
    /// ends without one or aborts.
    ///
    /// # Panics
    ///
    /// If `mem.len() < self.mem_words()`, or if an external function panics.
    ///
    /// ```
    /// use sluice_fpl::{Externs, Program};
    /// let p = Program::compile("R[0]++; RETURN R[0] / PKT.B[0];", &Externs::new()).unwrap();
    /// let mut mem = vec![0; p.mem_words()];
    /// assert_eq!(p.run(&[1], &mut mem), 1);
    /// assert_eq!(p.run(&[0], &mut mem), 0); // division by zero: abort
    /// assert_eq!(p.run(&[1], &mut mem), 3); // R[0] was still counted
    /// ```
    pub fn run(&self, pkt: &[u8], mem: &mut [u32]) -> u32 {
        assert!(
            mem.len() >= self.mem_words(),
            "the MBuf has {} words, the program needs {}",
            mem.len(),
            self.mem_words()
        );
        let (mem, regs) = mem[..self.mem_words()].split_at_mut(self.mem_size);
        let mut cx = interp::Cx { pkt, mem, regs };
        match self.exec(&self.body, &mut cx) {
            Ok(()) | Err(interp::Stop::Abort) | Err(interp::Stop::Break) => 0,
            Err(interp::Stop::Return(v)) => v,
        }
    }

    /// Call external function `func` of [`Program::externs`] as
    /// `EXTERN(name, input, output)` does, on the MEM words `mem` (the first
    /// [`Program::mem_size`] words of the MBuf); back ends call this.
    ///
    /// # Panics
    ///
    /// If `func` is not an index of [`Program::externs`] or the ranges are
    /// outside `mem` (the compiler proves they are not, for the program's
    /// own calls), or if the function panics.
    ///
    /// ```
    /// use sluice_fpl::{Externs, Program};
    /// let p = Program::compile("EXTERN(GetDynTCPDPortFromRTSP, 0, 0);", &Externs::builtin()).unwrap();
    /// assert_eq!(p.call_extern(0, 0, 0, &[], &mut []), 0);
    /// ```
    pub fn call_extern(
        &self,
        func: usize,
        input: u32,
        output: u32,
        pkt: &[u8],
        mem: &mut [u32],
    ) -> u32 {
        let d = &self.externs[func];
        let (i0, i1) = (input as usize, input as usize + d.input as usize);
        let (o0, o1) = (output as usize, output as usize + d.output as usize);
        if i1 <= o0 || o1 <= i0 || d.input == 0 || d.output == 0 {
            // Disjoint (or one side empty): borrow both parts of `mem`.
            if d.output == 0 {
                return (d.func)(&mem[i0..i1], &mut [], pkt);
            }
            if d.input == 0 {
                return (d.func)(&[], &mut mem[o0..o1], pkt);
            }
            if i1 <= o0 {
                let (a, b) = mem.split_at_mut(o0);
                (d.func)(&a[i0..i1], &mut b[..o1 - o0], pkt)
            } else {
                let (a, b) = mem.split_at_mut(i0);
                (d.func)(&b[..i1 - i0], &mut a[o0..o1], pkt)
            }
        } else {
            // Overlapping: the function reads a copy of its input.
            let mut small = [0u32; 64];
            let mut big = Vec::new();
            let copy: &mut [u32] = if d.input as usize <= small.len() {
                &mut small[..d.input as usize]
            } else {
                big.extend_from_slice(&mem[i0..i1]);
                &mut big
            };
            copy.copy_from_slice(&mem[i0..i1]);
            (d.func)(copy, &mut mem[o0..o1], pkt)
        }
    }
}

#[cfg(test)]
mod tests;
