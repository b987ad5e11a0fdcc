//! A thread that compiles units' functions off the writer's path.
//!
//! A publish compiles what fits in its budget; a function that would not
//! fit is handed to the worker, and its units run through the tree's walk
//! (correct, slower) until an update after the worker finishes collects
//! the function. So a change becomes visible to readers at once, however
//! large the code it needs. The rule: a job is pure (a plan in, a function
//! out), so nothing the worker does can see or change the tree.
//!
//! The thread starts with the first job and ends when the worker drops
//! (after the job in progress).

use super::emit::Consts;
use super::plan::PNode;
use super::units::Function;
use crate::NativeError;
use std::collections::HashSet;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a job compiles: a unit's plan whose constants are immediates (the
/// root's), or a shape.
pub(crate) type Job = (PNode, Consts);

/// A finished job, with the time it took.
pub(crate) type Done = (Job, Result<Function, NativeError>, Duration);

/// The worker: jobs in flight and the thread that runs them.
#[derive(Default)]
pub(crate) struct Worker {
    jobs: Option<Sender<Job>>,
    done: Option<Receiver<Done>>,
    thread: Option<JoinHandle<()>>,
    in_flight: HashSet<Job>,
}

impl Worker {
    /// Compile `job` on the worker's thread, unless it is already there.
    /// False when no thread could be started.
    pub(crate) fn submit(&mut self, job: Job) -> bool {
        if self.in_flight.contains(&job) {
            return true;
        }
        if self.jobs.is_none() && !self.start() {
            return false;
        }
        let sent = self
            .jobs
            .as_ref()
            .is_some_and(|tx| tx.send(job.clone()).is_ok());
        if sent {
            self.in_flight.insert(job);
        }
        sent
    }

    /// The finished jobs, waiting up to `wait` for the first when none
    /// has finished yet (and some are in flight).
    pub(crate) fn collect(&mut self, wait: Duration) -> Vec<Done> {
        let Some(rx) = &self.done else {
            return Vec::new();
        };
        let mut out: Vec<Done> = rx.try_iter().collect();
        if out.is_empty() && !self.in_flight.is_empty() && !wait.is_zero() {
            match rx.recv_timeout(wait) {
                Ok(d) => out.push(d),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {}
            }
        }
        for (job, _, _) in &out {
            self.in_flight.remove(job);
        }
        out
    }

    fn start(&mut self) -> bool {
        let (tx, jobs) = mpsc::channel::<Job>();
        let (done, rx) = mpsc::channel::<Done>();
        let thread = std::thread::Builder::new()
            .name("sluice-tree-jit".into())
            .spawn(move || {
                for job in jobs {
                    let start = Instant::now();
                    let f = Function::compile(&job.0, job.1);
                    if done.send((job, f, start.elapsed())).is_err() {
                        return;
                    }
                }
            });
        match thread {
            Ok(t) => {
                self.jobs = Some(tx);
                self.done = Some(rx);
                self.thread = Some(t);
                true
            }
            Err(_) => false,
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Closing the queue ends the thread after its job in progress.
        self.jobs = None;
        self.done = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
