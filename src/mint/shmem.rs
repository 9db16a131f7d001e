//! Shared memory: one [`GeneratorState`] per server, shared by every
//! backend of every database. Only available when the library is loaded
//! through `shared_preload_libraries`.
//!
//! This is the one home of the preload state: [`preloading`] (the library
//! is being loaded by the postmaster now) and [`is_preloaded`] (it was, so
//! shared memory exists). It depends on nothing else in the extension: the
//! initial state is computed by a function [`init`] is given.

use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::{pg_shmem_init, AssertPGRXSharedMemory, PgAtomic, PgSharedMemoryInitialization};
use snowflake_id_core::GeneratorState;
use std::cell::UnsafeCell;
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

static STATE: PgAtomic<AssertPGRXSharedMemory<GeneratorState>> =
    // SAFETY: the name is unique to this extension.
    unsafe { PgAtomic::new(c"snowflake_id generator state") };

/// How many databases the start-up read of the high-water marks can
/// leave to read their own (`crate::high_water`). 16 KB of shared memory.
pub const LAGGING_DATABASES: usize = 4096;
/// How many databases can hold a high-water mark far ahead of the clock
/// each on its own (issue 55); beyond that, every database stops.
pub const HELD_DATABASES: usize = 64;
/// How many databases left on a version before 0.8.0 are named in the
/// log, each once.
pub const OLD_VERSION_DATABASES: usize = 1024;

/// How many high-water readers the start-up read runs at once (issue 55:
/// 1,000 databases within 5 s). Each takes a background worker slot for
/// a few milliseconds; fewer run when fewer slots are free.
pub const READERS: usize = 4;

/// Whether a start must read every database's high-water mark before
/// the first ID: `snowflake_id_core::starts::Read`, decided by
/// `crate::mint::reservation` with `starts::read_at_start`.
pub use snowflake_id_core::starts::Read;

/// Set in the postmaster by the initial state's function (which runs
/// first at every creation of shared memory).
static MARKS_NEEDED: AtomicU32 = AtomicU32::new(Read::Yes as u32);

/// See [`MARKS_NEEDED`].
pub fn set_marks_needed(needed: Read) {
    MARKS_NEEDED.store(needed as u32, Ordering::Relaxed);
}

/// What the state file found at start-up said was pending (its bits),
/// and the reservation of a carry it said was due (`i64::MIN`: none):
/// set in the postmaster with [`MARKS_NEEDED`].
static STARTED_PENDING: AtomicU32 = AtomicU32::new(0);
static CARRY_AT_START: AtomicI64 = AtomicI64::new(i64::MIN);

/// See [`STARTED_PENDING`].
pub fn set_found_pending(bits: u32, carry_ms: i64) {
    STARTED_PENDING.store(bits, Ordering::Relaxed);
    CARRY_AT_START.store(carry_ms, Ordering::Relaxed);
}

/// A [`Read`] from the number it is kept as.
pub fn read_of(n: u32) -> Read {
    match n {
        x if x == Read::No as u32 => Read::No,
        x if x == Read::UnlessReplayed as u32 => Read::UnlessReplayed,
        _ => Read::Yes,
    }
}

fn marks_needed() -> Read {
    read_of(MARKS_NEEDED.load(Ordering::Relaxed))
}

/// What one high-water reader tells its launcher: a status
/// (`crate::high_water::scan` defines them) and the largest mark it read.
pub struct ReaderSlot {
    pub status: AtomicU32,
    pub found_ms: AtomicI64,
}

impl Default for ReaderSlot {
    fn default() -> Self {
        ReaderSlot {
            status: AtomicU32::new(0),
            found_ms: AtomicI64::new(i64::MIN),
        }
    }
}

/// What the extension tracks in shared memory besides the generator. New
/// at every start-up and crash restart, like the generator.
pub struct Tracking {
    /// The end LSN of the last reservation record written (`crate::mint::wal`),
    /// so that the worker can write it again once a checkpoint passes it.
    pub last_reservation_lsn: AtomicU64,
    /// Set once generation may begin: at once where the state file is
    /// provably current, else once the start-up read has raised the
    /// generator above every database's high-water mark.
    pub mark_ready: AtomicBool,
    /// The largest mark of this configuration found by the start-up read
    /// or a restore (`i64::MIN`: none).
    pub mark_found_ms: AtomicI64,
    /// The largest mark this server has written since start-up.
    pub mark_tried_ms: AtomicI64,
    /// A mark of this configuration found more than `reservation::FAR_MS`
    /// ahead of both the clock and the generator, held back rather than
    /// applied (issue 46): the largest such mark (`i64::MIN`: none), and
    /// the OID of a database that holds it.
    pub mark_far_ms: AtomicI64,
    pub mark_far_db: AtomicU32,
    /// The databases that hold such a mark, and each one's: minting stops
    /// in them alone (issue 55), until a superuser applies the marks
    /// (`snowflake_accept_configuration()`) or discards one
    /// (`snowflake_discard_high_water()`), or the clock comes within
    /// reach.
    pub held: snowflake_id_core::HeldMarks<HELD_DATABASES>,
    /// Bumped whenever a hold is taken, lifted or discarded: each backend
    /// reads its database's marks again before its next ID (it may have
    /// a hold of its own from an earlier read, or be in a database held
    /// by a restore since).
    pub held_epoch: AtomicU64,
    /// A database was held when every slot of `held` was taken (the
    /// red-team review of issue 55: a role with CREATEDB copying a held
    /// database 64 times). Its backends hold it themselves; every call
    /// keeps off the fast path until a superuser accepts.
    pub held_overflow: AtomicBool,
    /// A caller waits for the start-up read.
    pub mark_wanted: AtomicBool,
    /// The launcher's latch (a `*mut Latch` in shared memory), 0 when it
    /// is not running.
    pub launcher_latch: AtomicUsize,
    /// Databases the start-up read could not reach (OIDs): their own
    /// backends read their marks before their first ID.
    pub lagging: snowflake_id_core::OidSet<LAGGING_DATABASES>,
    /// The last database the start-up read failed at (0: none).
    pub mark_failed_db: AtomicU32,
    /// The answers of the readers the launcher runs at once, one slot each.
    pub readers: [ReaderSlot; READERS],
    /// How far the start-up read has got: databases listed, and read (or
    /// left to read their own marks).
    pub read_total: AtomicU32,
    pub read_done: AtomicU32,
    /// This start needs the marks only if crash recovery replays no
    /// reservation record ([`Read::UnlessReplayed`]); redo clears
    /// the need when it replays one (`crate::mint::wal`).
    pub unless_replayed: AtomicBool,
    /// The start-up read could not list the databases (a lock request
    /// queued on `pg_database`): every database reads its own mark before
    /// its first ID until the launcher has read them all.
    pub lag_all: AtomicBool,
    /// This start's stamp, drawn at random when this shared memory was
    /// made (issue 62; a valid `TimestampTz`, not the time): a mark
    /// stamped with it is this start's own.
    pub started_at: AtomicI64,
    /// The generator's frontier when it was last established by the
    /// start-up read or a superuser's acceptance (Unix ms; `i64::MIN`:
    /// taken at the first use): marks are held back beyond
    /// `reservation::FAR_MS` past the later of it and the clock, however
    /// many restored marks raised the generator since.
    pub far_base_ms: AtomicI64,
    /// What this start planned to read (`snowflake_id_core::starts::Read`
    /// as a number), for the decision after crash recovery.
    pub planned_read: AtomicU32,
    /// What the last state file and reservation record written said was
    /// pending (`crate::mint::reservation::pending_bits`).
    pub logged_pending: AtomicU32,
    /// A dropped database's IDs to carry into another database's mark:
    /// the reservation that covers them (`i64::MIN`: none), and the
    /// largest carried (issue 62).
    pub carry_wanted_ms: AtomicI64,
    pub carried_ms: AtomicI64,
    /// The database the last carry went into (0: none): dropping it
    /// makes the carry due again.
    pub carried_into: AtomicU32,
    /// Databases found with the extension at a version before 0.8.0, each
    /// named once in the log.
    pub old_versions: snowflake_id_core::GrowingOidSet<OLD_VERSION_DATABASES>,
    /// The worker-id lease (`crate::lease`).
    pub lease: LeaseShared,
}

/// The lease of a server whose worker id comes from a registry, as the
/// lease worker last saw it (`crate::lease`). The generator's own
/// `assigned_worker` says which id it holds; these say until when.
pub struct LeaseShared {
    /// The leased worker id, -1 when none is held.
    pub worker: AtomicI64,
    /// The registry row's epoch of the lease.
    pub epoch: AtomicI64,
    /// Unix ms: no ID under the lease carries a later timestamp.
    pub reserved_until_ms: AtomicI64,
    /// The lease's deadline on the wall clock when it was set, Unix ms
    /// (for `snowflake_stats()`); the deadline itself is the generator's
    /// `lease_deadline_ns`, which every minting call checks.
    pub deadline_wall_ms: AtomicI64,
    /// Requests to the registry that failed since start-up.
    pub errors: AtomicU64,
    /// The last failure, for error messages and `snowflake_stats()`.
    pub last_error: SharedText,
    /// The lease worker's latch (a `*mut Latch`), 0 when not running.
    pub latch: AtomicUsize,
    /// A caller needs the reservation in the registry raised now.
    pub wanted: AtomicBool,
    /// The last claim found every worker id held.
    pub exhausted: AtomicBool,
}

impl Default for LeaseShared {
    fn default() -> Self {
        LeaseShared {
            worker: AtomicI64::new(-1),
            epoch: AtomicI64::new(0),
            reserved_until_ms: AtomicI64::new(i64::MIN),
            deadline_wall_ms: AtomicI64::new(i64::MIN),
            errors: AtomicU64::new(0),
            last_error: SharedText::default(),
            latch: AtomicUsize::new(0),
            wanted: AtomicBool::new(false),
            exhausted: AtomicBool::new(false),
        }
    }
}

/// A short text in shared memory with one writer (a sequence lock): the
/// writer makes the sequence odd while it writes; readers retry until
/// they read the same even sequence before and after.
pub struct SharedText {
    seq: AtomicU64,
    len: AtomicUsize,
    bytes: [std::sync::atomic::AtomicU8; SharedText::CAPACITY],
}

impl Default for SharedText {
    fn default() -> Self {
        SharedText {
            seq: AtomicU64::new(0),
            len: AtomicUsize::new(0),
            bytes: std::array::from_fn(|_| std::sync::atomic::AtomicU8::new(0)),
        }
    }
}

impl SharedText {
    pub const CAPACITY: usize = 1024;

    /// Replace the text (one writer at a time: the lease worker); longer
    /// texts are cut at a character boundary.
    pub fn set(&self, text: &str) {
        let mut end = text.len().min(Self::CAPACITY);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        self.seq.fetch_add(1, Ordering::AcqRel);
        for (slot, b) in self.bytes.iter().zip(text.as_bytes()[..end].iter()) {
            slot.store(*b, Ordering::Relaxed);
        }
        self.len.store(end, Ordering::Relaxed);
        self.seq.fetch_add(1, Ordering::AcqRel);
    }

    /// The text, `None` when empty.
    pub fn get(&self) -> Option<String> {
        loop {
            let before = self.seq.load(Ordering::Acquire);
            if before % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let len = self.len.load(Ordering::Relaxed).min(Self::CAPACITY);
            let bytes: Vec<u8> = self.bytes[..len]
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect();
            std::sync::atomic::fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) == before {
                let s = String::from_utf8_lossy(&bytes).into_owned();
                return (!s.is_empty()).then_some(s);
            }
        }
    }
}

impl Tracking {
    /// The tracking of a new start: ready at once unless the start-up
    /// read of the marks is needed ([`set_marks_needed`]).
    fn at_start() -> Self {
        let needed = marks_needed();
        let mut random = [0u8; 8];
        // SAFETY: filling a buffer of this process with random bytes.
        let drawn = unsafe { pg_sys::pg_strong_random(random.as_mut_ptr().cast(), 8) };
        let random = if drawn {
            u64::from_ne_bytes(random)
        } else {
            // No strong source: the clock's microseconds, mixed.
            // SAFETY: reading the clock.
            (unsafe { pg_sys::GetCurrentTimestamp() } as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        };
        Tracking {
            mark_ready: AtomicBool::new(needed == Read::No),
            unless_replayed: AtomicBool::new(needed == Read::UnlessReplayed),
            planned_read: AtomicU32::new(needed as u32),
            logged_pending: AtomicU32::new(STARTED_PENDING.load(Ordering::Relaxed)),
            carry_wanted_ms: AtomicI64::new(CARRY_AT_START.load(Ordering::Relaxed)),
            // Issue 62: a random stamp, never the clock (two starts with
            // the same start-up time took each other's marks for their
            // own).
            started_at: AtomicI64::new(snowflake_id_core::starts::start_stamp(random)),
            ..Tracking::default()
        }
    }
}

impl Default for Tracking {
    fn default() -> Self {
        Tracking {
            last_reservation_lsn: AtomicU64::new(0),
            mark_ready: AtomicBool::new(false),
            mark_found_ms: AtomicI64::new(i64::MIN),
            mark_tried_ms: AtomicI64::new(i64::MIN),
            mark_far_ms: AtomicI64::new(i64::MIN),
            mark_far_db: AtomicU32::new(0),
            held: snowflake_id_core::HeldMarks::default(),
            held_epoch: AtomicU64::new(0),
            held_overflow: AtomicBool::new(false),
            mark_wanted: AtomicBool::new(false),
            launcher_latch: AtomicUsize::new(0),
            lagging: snowflake_id_core::OidSet::default(),
            mark_failed_db: AtomicU32::new(0),
            readers: std::array::from_fn(|_| ReaderSlot::default()),
            read_total: AtomicU32::new(0),
            read_done: AtomicU32::new(0),
            unless_replayed: AtomicBool::new(false),
            lag_all: AtomicBool::new(false),
            started_at: AtomicI64::new(i64::MIN),
            far_base_ms: AtomicI64::new(i64::MIN),
            planned_read: AtomicU32::new(Read::Yes as u32),
            logged_pending: AtomicU32::new(0),
            carry_wanted_ms: AtomicI64::new(i64::MIN),
            carried_ms: AtomicI64::new(i64::MIN),
            carried_into: AtomicU32::new(0),
            old_versions: snowflake_id_core::GrowingOidSet::default(),
            lease: LeaseShared::default(),
        }
    }
}

static TRACKING: PgAtomic<AssertPGRXSharedMemory<Tracking>> =
    // SAFETY: the name is unique to this extension.
    unsafe { PgAtomic::new(c"snowflake_id tracking") };

/// Serialises writers of the durable reservation.
static RENEWAL: RenewalLock = RenewalLock::new(c"snowflake_id reservation");

/// Set in the postmaster when shared memory was requested; inherited by
/// every backend it forks. Process-local by nature.
static PRELOADED: AtomicBool = AtomicBool::new(false);

/// True while `shared_preload_libraries` is being processed.
pub fn preloading() -> bool {
    // SAFETY: reading a plain global flag of the server.
    unsafe { pg_sys::process_shared_preload_libraries_in_progress }
}

/// True while the server is in recovery: a standby, or crash or
/// point-in-time recovery. IDs are not minted then.
pub fn in_recovery() -> bool {
    // SAFETY: RecoveryInProgress() may be called in any process.
    unsafe { pg_sys::RecoveryInProgress() }
}

/// True while `pg_upgrade` runs this server (binary-upgrade mode): its
/// databases are not this server's yet, so nothing is reserved or
/// written in them.
pub fn binary_upgrade() -> bool {
    // SAFETY: reading a plain global flag of the server.
    unsafe { pg_sys::IsBinaryUpgrade }
}

/// Computes the initial state when shared memory is created.
static INITIAL: OnceLock<fn() -> GeneratorState> = OnceLock::new();

/// Request and initialise the shared state. Call from `_PG_init` only
/// while preloading. `initial` computes the state each time shared memory
/// is created: at start-up, and again after a crash restart.
pub fn init(initial: fn() -> GeneratorState) {
    debug_assert!(preloading());
    let _ = INITIAL.set(initial);
    // The initial value is computed in the postmaster when shared memory is
    // created (start-up and crash restart).
    pg_shmem_init!(
        STATE = unsafe { AssertPGRXSharedMemory::new(INITIAL.get().expect("set just before")()) }
    );
    pg_shmem_init!(RENEWAL);
    pg_shmem_init!(TRACKING = unsafe { AssertPGRXSharedMemory::new(Tracking::at_start()) });
    PRELOADED.store(true, Ordering::Relaxed);
}

/// The shared [`Tracking`], or `None` when the library was not preloaded.
pub fn tracking() -> Option<&'static Tracking> {
    if is_preloaded() {
        Some(TRACKING.get())
    } else {
        None
    }
}

/// Whether the library was preloaded (so the generator exists). Safe to
/// call before shared memory is attached.
#[inline]
pub fn is_preloaded() -> bool {
    PRELOADED.load(Ordering::Relaxed)
}

/// The shared generator state, or `None` when the library was not preloaded.
#[inline]
pub fn state() -> Option<&'static GeneratorState> {
    if is_preloaded() {
        Some(STATE.get())
    } else {
        None
    }
}

/// The renewal lock: an LWLock, and a condition variable on which callers
/// that want it sleep. An LWLock wait cannot be interrupted, and a renewal
/// can take as long as a synchronous standby takes to answer (forever, if
/// it never does), so callers wait on the condition variable instead,
/// where a cancel, a statement timeout or a termination ends the wait.
struct RenewalLock {
    name: &'static CStr,
    inner: UnsafeCell<*mut RenewalShared>,
}

#[repr(C)]
struct RenewalShared {
    lock: *mut pg_sys::LWLock,
    cv: pg_sys::ConditionVariable,
}

// SAFETY: `inner` is written once per process, in the shared-memory
// start-up hook, before any backend code runs; the struct it points to is
// shared memory, protected by the LWLock and the condition variable's own
// spinlock.
unsafe impl Sync for RenewalLock {}

impl RenewalLock {
    const fn new(name: &'static CStr) -> Self {
        Self {
            name,
            inner: UnsafeCell::new(std::ptr::null_mut()),
        }
    }

    fn shared(&self) -> *mut RenewalShared {
        // SAFETY: see `Sync`; set before any caller can get here.
        let p = unsafe { *self.inner.get() };
        assert!(!p.is_null(), "snowflake_id renewal lock not initialised");
        p
    }
}

impl PgSharedMemoryInitialization for RenewalLock {
    type Value = u8;

    unsafe fn on_shmem_request(&'static self) {
        // SAFETY: called from the shared-memory request hook.
        unsafe {
            pg_sys::RequestAddinShmemSpace(std::mem::size_of::<RenewalShared>());
            pg_sys::RequestNamedLWLockTranche(self.name.as_ptr(), 1);
        }
    }

    unsafe fn on_shmem_startup(&'static self, _: u8) {
        // SAFETY: called from the shared-memory start-up hook; the struct is
        // written before any other process can see it.
        unsafe {
            let p = attach_named(self.name, std::mem::size_of::<RenewalShared>(), |p| {
                let p = p.cast::<RenewalShared>();
                (&raw mut (*p).lock)
                    .write(&raw mut (*pg_sys::GetNamedLWLockTranche(self.name.as_ptr())).lock);
                pg_sys::ConditionVariableInit(&raw mut (*p).cv);
            });
            *self.inner.get() = p.cast::<RenewalShared>();
        }
    }
}

/// The named struct of `size` bytes in shared memory, made by `init` the
/// first time (when no process has it yet), under AddinShmemInitLock:
/// the same sequence as pgrx's own PgLwLock (AddinShmemInitLock is
/// MainLWLockArray[21]). For structs too large, or too special, for
/// `PgAtomic` (which builds its value on the stack and moves it there).
///
/// # Safety
/// From a shared-memory start-up hook, with `size` requested in the
/// request hook; `init` must leave a valid value at the pointer.
pub unsafe fn attach_named(name: &CStr, size: usize, init: impl FnOnce(*mut u8)) -> *mut u8 {
    // SAFETY: as documented above.
    unsafe {
        let init_lock = &raw mut (*pg_sys::MainLWLockArray.add(21)).lock;
        pg_sys::LWLockAcquire(init_lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        let mut found = false;
        let p = pg_sys::ShmemInitStruct(name.as_ptr(), size, &mut found).cast::<u8>();
        if !found {
            init(p);
        }
        pg_sys::LWLockRelease(init_lock);
        p
    }
}

/// Holds the renewal lock; releasing it wakes the callers waiting for it.
pub struct RenewalGuard(*mut RenewalShared);

impl Drop for RenewalGuard {
    fn drop(&mut self) {
        // SAFETY: we hold the lock; the condition variable is initialised.
        unsafe {
            pg_sys::LWLockRelease((*self.0).lock);
            pg_sys::ConditionVariableBroadcast(&raw mut (*self.0).cv);
        }
    }
}

/// How long a waiter sleeps before trying the lock again even without a
/// wake-up: a holder that exits without releasing it normally (FATAL,
/// where PostgreSQL releases LWLocks but nobody broadcasts) costs its
/// waiters at most this long.
const RECHECK_MS: i64 = 10;

/// Take the reservation-renewal lock. Waiting is a sleep on a condition
/// variable, with `CHECK_FOR_INTERRUPTS` after every wake-up: a cancel, a
/// statement timeout or a termination ends it with the usual ERROR or
/// FATAL. Shows in `pg_stat_activity` as the wait event `Extension`.
pub fn renewal_lock() -> RenewalGuard {
    let sh = RENEWAL.shared();
    // SAFETY: the lock and the condition variable live in shared memory
    // for the life of the server. An ERROR raised in the sleep unwinds
    // through here holding nothing; transaction abort cancels the sleep.
    unsafe {
        let lock = (*sh).lock;
        let cv = &raw mut (*sh).cv;
        if !pg_sys::LWLockConditionalAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE) {
            pg_sys::ConditionVariablePrepareToSleep(cv);
            while !pg_sys::LWLockConditionalAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE) {
                pg_sys::ConditionVariableTimedSleep(cv, RECHECK_MS as _, pg_sys::PG_WAIT_EXTENSION);
            }
            pg_sys::ConditionVariableCancelSleep();
        }
    }
    RenewalGuard(sh)
}

/// Sleep until `ready()` holds or `timeout_ms` has passed, on the renewal
/// lock's condition variable ([`wake_waiters`] wakes it), with
/// `CHECK_FOR_INTERRUPTS` after every wake-up: a cancel or a statement
/// timeout ends the wait with the usual ERROR. Returns whether `ready()`
/// held.
pub fn wait_until(timeout_ms: i64, mut ready: impl FnMut() -> bool) -> bool {
    if ready() {
        return true;
    }
    let sh = RENEWAL.shared();
    let start = std::time::Instant::now();
    // SAFETY: the condition variable lives in shared memory for the life
    // of the server; an ERROR raised in the sleep unwinds through here,
    // and transaction abort cancels the sleep.
    unsafe {
        let cv = &raw mut (*sh).cv;
        pg_sys::ConditionVariablePrepareToSleep(cv);
        let mut ok = ready();
        while !ok && (start.elapsed().as_millis() as i64) < timeout_ms {
            pg_sys::ConditionVariableTimedSleep(cv, RECHECK_MS as _, pg_sys::PG_WAIT_EXTENSION);
            pgrx::check_for_interrupts!();
            ok = ready();
        }
        pg_sys::ConditionVariableCancelSleep();
        ok
    }
}

/// Wake every process sleeping in [`wait_until`] or for the renewal lock.
pub fn wake_waiters() {
    // SAFETY: see `wait_until`.
    unsafe { pg_sys::ConditionVariableBroadcast(&raw mut (*RENEWAL.shared()).cv) };
}
