//! How the command answers signals, as tcpdump does.
//!
//! The rule: SIGINT, SIGTERM and SIGHUP ask a run to stop, not to die.
//! Every reading loop looks at [`stopping`] and ends as if its input had
//! ended, so each output is flushed and put in place under its own name
//! with every packet accepted so far, and the run exits 0 (tcpdump's
//! status when interrupted). A second such signal ends the process at
//! once, status 128 + the signal, after removing every temporary file
//! it had open: only SIGKILL leaves one behind. SIGUSR1 asks a live
//! capture for its counts, and SIGHUP reloads a live `-F` filter instead
//! of stopping when [`install`] is told so.
//!
//! Signals are taken by a thread of their own (not in a handler), so that
//! what they do, files removed included, runs in ordinary code.

use super::Fail;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The flags the signal thread sets.
struct Flags {
    /// Stop: the first SIGINT, SIGTERM (or SIGHUP without a reload).
    stop: Arc<AtomicBool>,
    /// SIGUSR1 came.
    counts: Arc<AtomicBool>,
    /// SIGHUP came and reloads.
    reload: Arc<AtomicBool>,
    /// Whether SIGHUP reloads (else it stops).
    hup_reloads: AtomicBool,
    /// Other flags to set on a stop (a library's own).
    also: Mutex<Vec<Arc<AtomicBool>>>,
}

static FLAGS: OnceLock<Flags> = OnceLock::new();

fn flags() -> &'static Flags {
    FLAGS.get_or_init(|| Flags {
        stop: Arc::default(),
        counts: Arc::default(),
        reload: Arc::default(),
        hup_reloads: AtomicBool::new(false),
        also: Mutex::default(),
    })
}

/// Take SIGINT, SIGTERM, SIGHUP and SIGUSR1 from now on (once per
/// process; later calls only change what SIGHUP does). `hup_reloads`:
/// SIGHUP sets [`reload_wanted`] instead of stopping.
pub fn install(hup_reloads: bool) -> Result<(), Fail> {
    static STARTED: OnceLock<()> = OnceLock::new();
    let f = flags();
    f.hup_reloads.store(hup_reloads, Ordering::Relaxed);
    if STARTED.get().is_some() {
        return Ok(());
    }
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP, SIGUSR1])
        .map_err(|e| Fail(format!("cannot take signals: {e}")))?;
    let _ = STARTED.set(());
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                on_signal(sig);
            }
        })
        .map_err(|e| Fail(format!("cannot take signals: {e}")))?;
    Ok(())
}

fn on_signal(sig: i32) {
    let f = flags();
    match sig {
        SIGUSR1 => f.counts.store(true, Ordering::Relaxed),
        SIGHUP if f.hup_reloads.load(Ordering::Relaxed) => f.reload.store(true, Ordering::Relaxed),
        _ => {
            if f.stop.swap(true, Ordering::SeqCst) {
                // Asked twice: no more waiting, but no file left behind.
                sluice::capture::sink::remove_temporaries();
                std::process::exit(128 + sig);
            }
            for other in f.also.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                other.store(true, Ordering::SeqCst);
            }
        }
    }
}

/// Whether the run has been asked to stop.
pub fn stopping() -> bool {
    flags().stop.load(Ordering::Relaxed)
}

/// The stop flag itself (set by a signal; a live capture also sets it
/// when its duration is up).
pub fn stop_flag() -> Arc<AtomicBool> {
    flags().stop.clone()
}

/// Set `flag` too when the run is asked to stop (a library's own flag).
pub fn also_stop(flag: Arc<AtomicBool>) {
    if stopping() {
        flag.store(true, Ordering::SeqCst);
    }
    flags()
        .also
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(flag);
}

/// The flag SIGUSR1 sets.
pub fn counts_flag() -> Arc<AtomicBool> {
    flags().counts.clone()
}

/// The flag a reloading SIGHUP sets.
pub fn reload_flag() -> Arc<AtomicBool> {
    flags().reload.clone()
}
