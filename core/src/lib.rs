//! Pure core of `snowflake_id`: bit layout, epoch parsing and the lock-free
//! generator state machine. No pgrx, no PostgreSQL: everything here is
//! unit-tested with an injected clock (`cargo test -p snowflake_id_core`).

pub mod adopted;
pub mod base32;
pub mod clock;
pub mod epoch;
pub mod format;
pub mod generator;
pub mod held_marks;
pub mod layout;
pub mod lease;
pub mod oid_set;
pub mod public;
pub mod starts;
pub mod state_file;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use clock::{CachedClock, Clock, Cycles, MillisCache, SystemClock, Tsc};
pub use epoch::{format_epoch, parse_epoch, EpochError};
pub use format::{
    FieldOrder, Format, FormatError, FIELD_ORDERS, MAX_INTEGER_FIELD_BITS, MAX_UNIT_MS,
    PRESET_NAMES,
};
pub use generator::{
    until_issued, Attempt, Block, BlockAttempt, Config, Events, GenError, GeneratorState,
    LastMillisecond, DEBT_STEP_MS, NO_DEADLINE, NO_WORKER, STATIC_WORKER,
};
pub use held_marks::HeldMarks;
pub use layout::{IdError, Layout, LayoutError, Parts};
pub use lease::Lease;
pub use oid_set::{GrowingOidSet, OidSet};
pub use state_file::{compatibility, Compatibility, StateError, StateFile, StoreStep};
#[cfg(any(test, feature = "testing"))]
pub use testing::ManualClock;
