//! Query slots: how many queries compute at once, over all connections (and, per connection,
//! how many answers it may hold unwritten), with a freed slot going to the connection served
//! longest ago.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Bounds the queries that compute at once over all connections. A query holds its result in
/// memory while it runs: `find "*" limit 100000` on django is about 110 MB, so the
/// per-connection limit alone let 5 pipelining clients take the daemon to 4 GB. A query past the
/// bound waits for a slot (it holds nothing meanwhile) instead of being refused.
pub(super) struct QuerySlots {
    state: Mutex<SlotState>,
    freed: std::sync::Condvar,
}

#[derive(Default)]
struct SlotState {
    free: usize,
    /// Slots held, by connection.
    held: HashMap<u64, usize>,
    /// Queries waiting for a slot, in arrival order: (connection, ticket).
    waiting: std::collections::VecDeque<(u64, u64)>,
    next_ticket: u64,
    /// Slots granted so far, and the number of the last one each connection got.
    grants: u64,
    last_grant: HashMap<u64, u64>,
}

/// Connections whose last grant [`SlotState`] remembers (the most recent ones).
const GRANTS_REMEMBERED: u64 = 4096;

impl SlotState {
    /// The waiting query a free slot goes to: of those whose connection holds the fewest slots,
    /// the one whose connection was served longest ago (never, first), then the first to
    /// arrive. Ten clients each pipelining two `find "*" limit 100000` held a one-line `callers`
    /// of an eleventh back 7 to 9 s when slots went first come, first served.
    fn next_in_line(&self) -> Option<u64> {
        self.waiting
            .iter()
            .min_by_key(|(conn, ticket)| {
                let held = self.held.get(conn).copied().unwrap_or(0);
                let served = self.last_grant.get(conn).map_or(0, |g| g + 1);
                (held, served, *ticket)
            })
            .map(|(_, t)| *t)
    }

    fn grant(&mut self, conn: u64) {
        self.free -= 1;
        *self.held.entry(conn).or_default() += 1;
        self.last_grant.insert(conn, self.grants);
        self.grants += 1;
        if self.last_grant.len() as u64 > GRANTS_REMEMBERED {
            let oldest_kept = self.grants.saturating_sub(GRANTS_REMEMBERED);
            self.last_grant.retain(|_, g| *g >= oldest_kept);
        }
    }

    fn leave(&mut self, ticket: u64) {
        self.waiting.retain(|(_, t)| *t != ticket);
    }
}

impl QuerySlots {
    pub(super) fn new(slots: usize) -> QuerySlots {
        QuerySlots {
            state: Mutex::new(SlotState { free: slots, ..SlotState::default() }),
            freed: std::sync::Condvar::new(),
        }
    }

    /// Waits for a slot for a query of connection `conn` (see [`SlotState::next_in_line`]);
    /// `None` when `cancel` is set meanwhile (its client hung up, or cancelled it).
    pub(super) fn acquire(&self, conn: u64, cancel: Option<&AtomicBool>) -> Option<QuerySlot<'_>> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.waiting.push_back((conn, ticket));
        loop {
            if state.free > 0 && state.next_in_line() == Some(ticket) {
                state.leave(ticket);
                state.grant(conn);
                // Another slot may be free for the next in line.
                self.freed.notify_all();
                return Some(QuerySlot { slots: self, conn });
            }
            if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                state.leave(ticket);
                self.freed.notify_all();
                return None;
            }
            // Woken when a slot is freed; the timeout notices a cancellation.
            state = self.freed.wait_timeout(state, Duration::from_millis(100)).unwrap_or_else(|p| p.into_inner()).0;
        }
    }
}

pub(super) struct QuerySlot<'a> {
    slots: &'a QuerySlots,
    conn: u64,
}

impl Drop for QuerySlot<'_> {
    fn drop(&mut self) {
        let mut state = self.slots.state.lock().unwrap_or_else(|p| p.into_inner());
        state.free += 1;
        if let Some(held) = state.held.get_mut(&self.conn) {
            *held -= 1;
            if *held == 0 {
                state.held.remove(&self.conn);
            }
        }
        self.slots.freed.notify_all();
    }
}

/// Queries running at once over all connections: twice the cores, at least 4 and at most 16.
/// Measured on django with 5 clients pipelining 8 `find "*" limit 100000` each (2 cores): peak
/// memory 4.0 GB and 18.4 s without the bound, 1.49 GB and 11.6 s with 8 slots, 1.17 GB and
/// 12.4 s with 4.
pub(super) fn max_running_queries() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()).saturating_mul(2).clamp(4, 16)
}

#[cfg(test)]
mod query_slot_tests {
    use super::*;
    use std::sync::Arc;

    /// A freed slot goes to the connection served longest ago, not to the first in the queue:
    /// a client that pipelined many queries does not hold back one that sent a single query.
    #[test]
    fn a_freed_slot_goes_to_the_connection_served_longest_ago() {
        let slots = Arc::new(QuerySlots::new(1));
        let held = slots.acquire(1, None).expect("a free slot");
        let order = Arc::new(Mutex::new(Vec::new()));
        let waiter = |conn: u64| {
            let (slots, order) = (slots.clone(), order.clone());
            std::thread::spawn(move || {
                let slot = slots.acquire(conn, None).expect("no cancel");
                order.lock().unwrap_or_else(|p| p.into_inner()).push(conn);
                std::thread::sleep(Duration::from_millis(20));
                drop(slot);
            })
        };
        // Connection 1 queues three more before connection 2 queues its one.
        let mut waiters = Vec::new();
        for _ in 0..3 {
            waiters.push(waiter(1));
            std::thread::sleep(Duration::from_millis(30));
        }
        waiters.push(waiter(2));
        std::thread::sleep(Duration::from_millis(30));
        drop(held);
        for w in waiters {
            w.join().expect("a waiter");
        }
        let order = order.lock().unwrap_or_else(|p| p.into_inner()).clone();
        assert_eq!(order.first(), Some(&2), "connection 2 was never served: it goes first ({order:?})");
        assert_eq!(order.len(), 4);
    }

    /// A query whose client hung up leaves the queue.
    #[test]
    fn a_cancelled_query_stops_waiting() {
        let slots = Arc::new(QuerySlots::new(1));
        let _held = slots.acquire(1, None).expect("a free slot");
        let cancel = Arc::new(AtomicBool::new(false));
        let waiter = {
            let (slots, cancel) = (slots.clone(), cancel.clone());
            std::thread::spawn(move || slots.acquire(2, Some(&cancel)).is_none())
        };
        std::thread::sleep(Duration::from_millis(50));
        cancel.store(true, Ordering::Relaxed);
        assert!(waiter.join().expect("the waiter"), "no slot for a cancelled query");
        assert!(slots.state.lock().unwrap_or_else(|p| p.into_inner()).waiting.is_empty());
    }

    #[test]
    fn a_query_past_the_bound_waits_for_a_slot() {
        let slots = Arc::new(QuerySlots::new(2));
        let (a, b) = (slots.acquire(1, None), slots.acquire(1, None));
        let third_ran = Arc::new(AtomicBool::new(false));
        let waiter = {
            let (slots, third_ran) = (slots.clone(), third_ran.clone());
            std::thread::spawn(move || {
                let _slot = slots.acquire(2, None);
                third_ran.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(Duration::from_millis(100));
        assert!(!third_ran.load(Ordering::SeqCst), "both slots are held");
        drop(a);
        waiter.join().expect("the third query ran once a slot was freed");
        assert!(third_ran.load(Ordering::SeqCst));
        drop(b);
        assert_eq!(slots.state.lock().unwrap_or_else(|p| p.into_inner()).free, 2);
    }
}
