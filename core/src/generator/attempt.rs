//! What one attempt of the generator produces, and the one retry loop
//! that turns attempts into IDs.

use super::GenError;
use crate::layout::Layout;

/// What one attempt produced: an ID ([`GeneratorState::try_next`]) or a
/// [`Block`] ([`GeneratorState::try_next_block`]), or what to do first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attempt<T = i64> {
    Issued(T),
    /// Back-pressure: sleep this many microseconds (until the reference
    /// clock admits the next ID), then try again.
    Wait(u64),
    /// The next ID needs a reservation up to this Unix ms to be persisted
    /// first; extend it (see [`GeneratorState::renewal_target`]) and retry.
    Reserve(i64),
}

/// A run of consecutive IDs of one worker, issued by one compare-and-swap:
/// `count` IDs at consecutive timeline positions starting at `first`
/// (see [`Layout::position`]), crossing millisecond boundaries as needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    pub first: i64,
    pub count: u64,
}

impl Block {
    /// The IDs of the block, in increasing order.
    pub fn ids(self, layout: Layout) -> impl Iterator<Item = i64> {
        let first = layout.position(self.first as u64);
        let worker = layout.split(self.first as u64).1;
        (first..first + self.count).map(move |p| layout.at_position(p, worker) as i64)
    }

    /// The last ID of the block.
    pub fn last(self, layout: &Layout) -> i64 {
        let (_, worker, _) = layout.split(self.first as u64);
        layout.at_position(layout.position(self.first as u64) + self.count - 1, worker) as i64
    }

    /// Whether the block's IDs are consecutive integers (it stays within
    /// one millisecond: crossing one skips the other workers' IDs). What
    /// an adopted sequence with `INCREMENT BY n` hands out needs it: the
    /// caller numbers the IDs itself, `v - n + 1 .. v` or `v .. v + n - 1`.
    pub fn is_run(self, layout: &Layout) -> bool {
        self.count > 0 && self.last(layout) - self.first == self.count as i64 - 1
    }
}

/// What one block attempt produced (see [`GeneratorState::try_next_block`]).
pub type BlockAttempt = Attempt<Block>;

impl<T> Attempt<T> {
    /// The same outcome with the issued value converted.
    #[inline]
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Attempt<U> {
        match self {
            Attempt::Issued(x) => Attempt::Issued(f(x)),
            Attempt::Wait(us) => Attempt::Wait(us),
            Attempt::Reserve(ms) => Attempt::Reserve(ms),
        }
    }
}

/// Repeat `attempt` until it issues (an ID or a block), sleeping through
/// back-pressure with `sleep_us` and persisting a reservation with
/// `reserve` (its argument: the Unix ms to reserve up to) when asked to.
/// The one retry loop of every caller: [`GeneratorState::next_id`],
/// [`GeneratorState::next_block`] and the extension's SQL functions.
#[inline(always)]
pub fn until_issued<T>(
    mut attempt: impl FnMut() -> Result<Attempt<T>, GenError>,
    mut sleep_us: impl FnMut(u64),
    mut reserve: impl FnMut(i64),
) -> Result<T, GenError> {
    loop {
        match attempt()? {
            Attempt::Issued(x) => return Ok(x),
            Attempt::Wait(us) => sleep_us(us),
            Attempt::Reserve(ms) => reserve(ms),
        }
    }
}

/// The `reserve` of states without a durable reservation (tests, tools),
/// which never ask for one.
pub(super) fn no_host_reservation(ms: i64) {
    unreachable!("reservation to {ms} requested without a host")
}
