//! The threads queries run on: one per query computing or writing its answer, as before, but
//! kept once done (up to [`MAX_IDLE_WORKERS`], for [`IDLE_WORKER_LIFETIME`]) for the next query
//! instead of a new thread each time. Starting a thread is a dozen system calls (its stack,
//! signal stack, name, robust list) and a scheduler round trip, which a one-row `callers` paid on
//! every request.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crossbeam::channel::{Receiver, RecvTimeoutError, Sender};

/// Threads kept waiting for a query at most: more queries than this at once start new threads,
/// which end when they are done.
const MAX_IDLE_WORKERS: usize = 8;

/// How long a thread waits for the next query before it ends.
const IDLE_WORKER_LIFETIME: Duration = Duration::from_secs(60);

type Job = Box<dyn FnOnce() + Send + 'static>;

pub(super) struct QueryWorkers {
    jobs: Sender<Job>,
    waiting_jobs: Receiver<Job>,
    /// Threads waiting on `waiting_jobs` that no job has been sent for yet. Sending a job first
    /// takes one of these (so each job sent has a thread that will take it), or starts a thread.
    idle: std::sync::Arc<AtomicUsize>,
}

impl QueryWorkers {
    pub(super) fn new() -> QueryWorkers {
        let (jobs, waiting_jobs) = crossbeam::channel::unbounded();
        QueryWorkers { jobs, waiting_jobs, idle: std::sync::Arc::new(AtomicUsize::new(0)) }
    }

    /// Runs `job` on a waiting thread, or on a new one when none waits. Fails only when a new
    /// thread cannot be started (the job is then dropped, not run).
    pub(super) fn run(&self, job: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
        let job: Job = Box::new(job);
        let claimed = self.idle.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)).is_ok();
        let job = if claimed {
            // A thread counted idle is waiting, or about to: it takes this job (or another
            // thread does, and it the next one). The pool holds both ends of the channel, so
            // sending fails never; if it did, the job would go to a new thread.
            match self.jobs.send(job) {
                Ok(()) => return Ok(()),
                Err(unsent) => unsent.into_inner(),
            }
        } else {
            job
        };
        let (jobs, idle) = (self.waiting_jobs.clone(), self.idle.clone());
        std::thread::Builder::new().name("fresco-query".into()).spawn(move || {
            job();
            worker_loop(&jobs, &idle);
        })?;
        Ok(())
    }
}

/// After its first job: waits for another while fewer than [`MAX_IDLE_WORKERS`] wait, and ends
/// after [`IDLE_WORKER_LIFETIME`] without one.
fn worker_loop(jobs: &Receiver<Job>, idle: &AtomicUsize) {
    loop {
        let offered =
            idle.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < MAX_IDLE_WORKERS).then_some(n + 1));
        if offered.is_err() {
            return;
        }
        loop {
            match jobs.recv_timeout(IDLE_WORKER_LIFETIME) {
                Ok(job) => {
                    job();
                    break;
                }
                Err(RecvTimeoutError::Timeout) => {
                    // Leave only if no job was sent against this thread's offer: when none is
                    // left unclaimed, a job is on its way, and some waiting thread must take it.
                    if idle.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)).is_ok() {
                        return;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Barrier, Mutex};

    #[test]
    fn a_query_after_another_runs_on_the_same_thread() {
        let workers = QueryWorkers::new();
        let threads = Arc::new(Mutex::new(Vec::new()));
        for _ in 0..5 {
            let (done_tx, done_rx) = crossbeam::channel::bounded(1);
            let threads = threads.clone();
            workers
                .run(move || {
                    threads.lock().expect("lock").push(std::thread::current().id());
                    done_tx.send(()).expect("send");
                })
                .expect("run");
            done_rx.recv().expect("done");
            // The thread offers itself again right after its job: wait until it has.
            while workers.idle.load(Ordering::Acquire) == 0 {
                std::thread::yield_now();
            }
        }
        let threads = threads.lock().expect("lock");
        assert!(threads.iter().all(|t| *t == threads[0]), "{threads:?}");
    }

    /// Queries running at once each have a thread: eight that wait for one another all finish
    /// (a pool of fewer threads than queries would hang here).
    #[test]
    fn queries_at_once_each_get_a_thread() {
        let workers = QueryWorkers::new();
        let (done_tx, done_rx) = crossbeam::channel::unbounded();
        for _round in 0..3 {
            let all_started = Arc::new(Barrier::new(MAX_IDLE_WORKERS + 4));
            for _ in 0..MAX_IDLE_WORKERS + 4 {
                let (all_started, done_tx) = (all_started.clone(), done_tx.clone());
                workers
                    .run(move || {
                        all_started.wait();
                        done_tx.send(()).expect("send");
                    })
                    .expect("run");
            }
            for _ in 0..MAX_IDLE_WORKERS + 4 {
                done_rx.recv_timeout(Duration::from_secs(10)).expect("every query finishes");
            }
        }
        // No more threads than the bound stay waiting.
        std::thread::sleep(Duration::from_millis(100));
        assert!(workers.idle.load(Ordering::Acquire) <= MAX_IDLE_WORKERS);
    }
}
