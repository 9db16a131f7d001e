//! The "snowflake_id lease" background worker: it claims this server's
//! worker id from the registry, renews it every third of
//! `snowflake_id.lease_ttl`, and releases it at a clean shutdown; what it
//! holds it hands to minting through `crate::mint::worker` (see the
//! room's overview in [`crate::lease`]).

use crate::lease::registry_client::{Connection, Failure};
use crate::mint::shmem::{self, LeaseShared};
use crate::mint::worker;
use crate::{datadir, errors, gucs};
use pgrx::bgworkers::{
    BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, SignalWakeFlags,
};
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::{PgLogLevel, PgSqlErrorCode};
use snowflake_id_core::lease::{claim_retry_in_ms, retry_delay_ms};
use snowflake_id_core::{format_epoch, Clock, GeneratorState, Layout, Lease, SystemClock};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

// ---------------------------------------------------------------------
// The lease worker.
// ---------------------------------------------------------------------

/// This postmaster's token, random at each start (kept across crash
/// restarts, which keep the postmaster): a UUID in text form.
static TOKEN: OnceLock<String> = OnceLock::new();

/// Draw the token. In the postmaster, from `_PG_init`, when the worker id
/// is leased.
pub fn draw_token() {
    let mut b = [0u8; 16];
    // SAFETY: pg_strong_random fills the buffer it is given.
    let ok = unsafe { pg_sys::pg_strong_random(b.as_mut_ptr().cast(), b.len()) };
    if !ok {
        errors::invalid_setting("could not generate a random token for the worker-id lease");
    }
    b[6] = (b[6] & 0x0f) | 0x40; // a version 4 UUID
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    let _ = TOKEN.set(format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    ));
}

/// Check the configuration at start-up (in the postmaster): a leased
/// worker id needs a registry and a layout the registry can hand out.
pub fn check_configuration(layout: &Layout) -> Option<String> {
    if !gucs::leased() {
        return None;
    }
    if gucs::registry_conninfo().trim().is_empty() {
        return Some(
            "snowflake_id.worker_id_source is \"registry\" but snowflake_id.registry is empty"
                .into(),
        );
    }
    if layout.worker_bits() > gucs::MAX_LEASED_WORKER_BITS {
        return Some(format!(
            "snowflake_id.worker_bits is {}, but a registry hands out at most {} bits of worker ids",
            layout.worker_bits(),
            gucs::MAX_LEASED_WORKER_BITS
        ));
    }
    None
}

pub fn register() {
    if !gucs::leased() {
        return;
    }
    // After recovery only: a standby claims nothing until it is promoted.
    BackgroundWorkerBuilder::new("snowflake_id lease")
        .set_type("snowflake_id lease")
        .set_library("snowflake_id")
        .set_function("snowflake_id_lease_main")
        .enable_shmem_access(None)
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(Duration::from_secs(1)))
        .load();
}

/// Set once a SIGTERM arrived (pgrx's flag is cleared when read).
static STOPPING: AtomicBool = AtomicBool::new(false);

fn stopping() -> bool {
    if BackgroundWorker::sigterm_received() {
        STOPPING.store(true, Ordering::Relaxed);
    }
    STOPPING.load(Ordering::Relaxed)
}

/// This holder, as the registry records it.
struct Holder {
    host: String,
    port: i32,
    system_identifier: String,
    data_directory: String,
}

fn holder() -> Holder {
    unsafe extern "C" {
        fn gethostname(name: *mut std::ffi::c_char, len: usize) -> std::ffi::c_int;
    }
    let mut buf = [0 as std::ffi::c_char; 256];
    // SAFETY: gethostname writes at most len bytes; DataDir is the data
    // directory's path, set before libraries are loaded.
    let (host, data_directory) = unsafe {
        let host = if gethostname(buf.as_mut_ptr(), buf.len() - 1) == 0 {
            std::ffi::CStr::from_ptr(buf.as_ptr())
                .to_string_lossy()
                .into_owned()
        } else {
            String::new()
        };
        let dd = std::ffi::CStr::from_ptr(pg_sys::DataDir)
            .to_string_lossy()
            .into_owned();
        (host, dd)
    };
    Holder {
        host,
        // SAFETY: a plain global of the server.
        port: unsafe { pg_sys::PostPortNumber },
        system_identifier: datadir::system_identifier().to_string(),
        data_directory,
    }
}

/// The lease worker's view of its registry session and its lease.
struct Worker {
    state: &'static GeneratorState,
    shared: &'static LeaseShared,
    layout: Layout,
    holder: Holder,
    conn: Option<Connection>,
    /// The schema of the extension in the registry database, quoted.
    schema: String,
    conninfo: String,
    /// The lease last granted, live or not (a renewal that still matches
    /// its token and epoch revives it).
    lease: Option<Lease>,
    failures: u32,
    /// Monotonic ns of the next attempt after a failure.
    retry_at_ns: i64,
}

const CLAIM_SQL: &str = "SELECT worker_id, lease_epoch, floor_ms, reserved_until_ms FROM {schema}.snowflake_registry_claim($1::pg_catalog.uuid, $2::pg_catalog.text, $3::pg_catalog.int4, $4::pg_catalog.text, $5::pg_catalog.text, $6::pg_catalog.int4, $7::pg_catalog.int4, $8::pg_catalog.int4, $9::pg_catalog.int8, $10::pg_catalog.int4, $11::pg_catalog.int8)";
const RENEW_SQL: &str = "SELECT reserved_until_ms FROM {schema}.snowflake_registry_renew($1::pg_catalog.int4, $2::pg_catalog.uuid, $3::pg_catalog.int8, $4::pg_catalog.int4, $5::pg_catalog.int8)";
const RELEASE_SQL: &str = "SELECT {schema}.snowflake_registry_release($1::pg_catalog.int4, $2::pg_catalog.uuid, $3::pg_catalog.int8)";
/// The session the lease worker needs, whatever the registry's role and
/// database settings say (`ALTER ROLE ... SET` by a member sharing the
/// login role, `ALTER DATABASE ... SET` by the database's owner): a
/// session's own values outrank both. Writable, read-committed, claims
/// and renewals waited for by synchronous standbys (a failover must not
/// lose a reservation), bounded waits (a lock queue or a standby that
/// never answers ends the statement, and with it the wait), no time-out
/// while idle between renewals, and nothing found through `search_path`.
/// Only the settings the registry's server has are set.
const SESSION_SQL: &str = "SELECT pg_catalog.count(pg_catalog.set_config(s.name, s.value, false)) FROM (VALUES ('role', 'none'), ('search_path', 'pg_catalog, pg_temp'), ('default_transaction_read_only', 'off'), ('default_transaction_isolation', 'read committed'), ('synchronous_commit', 'on'), ('statement_timeout', $1), ('lock_timeout', $2), ('idle_in_transaction_session_timeout', '0'), ('idle_session_timeout', '0'), ('transaction_timeout', '0'), ('client_connection_check_interval', '1000')) AS s(name, value) JOIN pg_catalog.pg_settings p ON p.name OPERATOR(pg_catalog.=) s.name";

/// Where the extension's functions are in the registry database, and
/// whether anyone but a superuser could change what those names call
/// (the lease worker refuses the registry then):
/// the database's owner (who may drop or rename the extension's schema
/// when it is `public`, and queue locks on the registry's table), the
/// schema's owner, every role with CREATE in the schema (an overload
/// makes each call ambiguous), and every role that is a member of either
/// owner (it has the owner's rights): PUBLIC and up to five roles are
/// named.
const SCHEMA_SQL: &str = "SELECT pg_catalog.quote_ident(n.nspname), dbo.rolsuper, so.rolsuper OR (n.nspowner OPERATOR(pg_catalog.=) 'pg_database_owner'::pg_catalog.regrole::pg_catalog.oid AND dbo.rolsuper), (SELECT pg_catalog.string_agg(x.who, ', ') FROM (SELECT 'PUBLIC' AS who FROM pg_catalog.aclexplode(COALESCE(n.nspacl, pg_catalog.acldefault('n', n.nspowner))) a WHERE a.grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid AND a.privilege_type OPERATOR(pg_catalog.=) 'CREATE' UNION ALL (SELECT pg_catalog.quote_ident(r.rolname) FROM pg_catalog.pg_roles r WHERE NOT r.rolsuper AND r.oid OPERATOR(pg_catalog.<>) 'pg_database_owner'::pg_catalog.regrole::pg_catalog.oid AND (pg_catalog.has_schema_privilege(r.oid, n.oid, 'CREATE') OR pg_catalog.pg_has_role(r.oid, n.nspowner, 'MEMBER') OR pg_catalog.pg_has_role(r.oid, d.datdba, 'MEMBER')) ORDER BY r.rolname LIMIT 5)) x), pg_catalog.quote_ident(dbo.rolname), pg_catalog.quote_ident(so.rolname) FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace JOIN pg_catalog.pg_roles so ON so.oid OPERATOR(pg_catalog.=) n.nspowner JOIN pg_catalog.pg_database d ON d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database() JOIN pg_catalog.pg_roles dbo ON dbo.oid OPERATOR(pg_catalog.=) d.datdba WHERE e.extname OPERATOR(pg_catalog.=) 'snowflake_id'";

/// The schema of the extension in the registry database, from a row of
/// [`SCHEMA_SQL`], or why the registry is refused.
fn safe_schema(name: &str, row: Option<&Vec<Option<String>>>) -> Result<String, Failure> {
    let refuse = |why: String| Err(Failure::local(format!("registry refused: {why}")).at(name));
    let Some(r) = row else {
        return refuse("the extension snowflake_id is not installed in it".into());
    };
    let col = |i: usize| r.get(i).cloned().flatten().unwrap_or_default();
    if col(1) != "t" {
        return refuse(format!(
            "its owner {} is not a superuser, and could drop or replace the registry",
            col(4)
        ));
    }
    if col(2) != "t" {
        return refuse(format!(
            "the extension's schema {} belongs to {}, who is not a superuser",
            col(0),
            col(5)
        ));
    }
    let who = col(3);
    if !who.is_empty() {
        // Where PUBLIC may create, every role may: name PUBLIC alone.
        let who = if who.starts_with("PUBLIC") {
            "PUBLIC".to_string()
        } else {
            who
        };
        return refuse(format!(
            "{who} may create objects in the extension's schema {} or act as its owner or the database's owner",
            col(0)
        ));
    }
    Ok(col(0))
}

fn log(level: PgLogLevel, msg: String) {
    errors::report(
        level,
        PgSqlErrorCode::ERRCODE_SUCCESSFUL_COMPLETION,
        msg,
        None,
        None,
    );
}

/// The lease's clock ([`Clock::lease_ns`]): monotonic, and counting a
/// suspend.
fn mono_ns() -> i64 {
    SystemClock.lease_ns()
}

fn parse(v: &Option<String>) -> Option<i64> {
    v.as_deref().and_then(|s| s.parse().ok())
}

impl Worker {
    fn ttl_ms(&self) -> i64 {
        gucs::lease_ttl_ms()
    }

    /// How long one request may take: a third of the TTL, but not past
    /// the live lease's deadline (at least 500 ms, so that a request can
    /// still revive a lease that ran out). The deadline itself does not
    /// depend on it: every minting call checks it.
    fn request_timeout(&self) -> Duration {
        let mut ms = (self.ttl_ms() / 3).max(1_000);
        if let Some(l) = self.lease {
            if self.shared.worker.load(Ordering::Acquire) >= 0 {
                let left = (l.deadline_ns() - mono_ns()) / 1_000_000;
                ms = ms.min(left.max(500));
            }
        }
        Duration::from_millis(ms as u64)
    }

    /// The Unix ms the generator has used or may soon use: its frontier,
    /// and the durable reservation, which IDs may reach.
    fn frontier_ms(&self) -> i64 {
        let c = SystemClock;
        let f = self
            .state
            .frontier_ms(&self.layout, c.wall_ns(), c.mono_ns());
        match self.state.reserved_until_ms.load(Ordering::Acquire) {
            i64::MIN | i64::MAX => f,
            r => f.max(r),
        }
    }

    fn failed(&mut self, what: &str, e: &Failure) {
        self.shared.errors.fetch_add(1, Ordering::Relaxed);
        let text = format!("{what}: {e}");
        if self.shared.last_error.get().as_deref() != Some(text.as_str()) {
            log(PgLogLevel::WARNING, format!("snowflake_id lease: {text}"));
        }
        self.shared.last_error.set(&text);
        if e.sqlstate.is_none() {
            self.conn = None; // a transport failure: reconnect next time
        }
        self.failures = self.failures.saturating_add(1);
        self.retry_at_ns =
            mono_ns() + retry_delay_ms(self.failures, self.ttl_ms()).saturating_mul(1_000_000);
    }

    fn succeeded(&mut self) {
        self.failures = 0;
        self.retry_at_ns = i64::MIN;
        self.shared.last_error.set("");
    }

    /// Run `sql` (`{schema}` stands for the extension's schema) on the
    /// registry, connecting first if needed. Before every request, not
    /// only once per connection, the registry is checked ([`SCHEMA_SQL`]):
    /// a grant of CREATE, or a new owner, takes effect at once.
    fn query(
        &mut self,
        sql: &str,
        params: &[Option<String>],
    ) -> Result<Vec<Vec<Option<String>>>, Failure> {
        let timeout = self.request_timeout();
        if self.conn.as_ref().is_some_and(|c| !c.ok()) {
            self.conn = None;
        }
        let c = match &mut self.conn {
            Some(c) => c,
            None => {
                let mut c = Connection::open(&self.conninfo, timeout, &stopping)?;
                let ms = timeout.as_millis() as i64;
                c.query(
                    SESSION_SQL,
                    &[Some(format!("{ms}ms")), Some(format!("{}ms", ms / 2))],
                    timeout,
                    &stopping,
                )?;
                self.conn.insert(c)
            }
        };
        let rows = c.query(SCHEMA_SQL, &[], timeout, &stopping)?;
        self.schema = safe_schema(&c.name, rows.first())?;
        let sql = sql.replace("{schema}", &self.schema);
        let r = c.query(&sql, params, timeout, &stopping);
        if r.is_err() && !c.ok() {
            self.conn = None;
        }
        // Every failure of the client names its registry already.
        r
    }

    /// Stop minting: no worker id is held from here on.
    fn drop_worker(&self, why: &str) {
        if !worker::revoke() {
            return;
        }
        log(
            PgLogLevel::WARNING,
            format!("snowflake_id lease: stopped minting: {why}"),
        );
    }

    /// Hand the generator a lease: every later ID is above `floor_ms`.
    fn take(&mut self, l: Lease, floor_ms: i64, how: &str) {
        worker::grant(&l, floor_ms);
        self.lease = Some(l);
        log(
            PgLogLevel::LOG,
            format!(
                "snowflake_id lease: {how} worker id {} (lease epoch {}); IDs continue above {}, reserved until {}",
                l.worker,
                l.epoch,
                format_epoch(floor_ms.max(self.frontier_ms())),
                format_epoch(l.reserved_until_ms)
            ),
        );
    }

    fn claim(&mut self) {
        let ttl = self.ttl_ms();
        let sent = mono_ns();
        let params = vec![
            TOKEN.get().cloned(),
            Some(self.holder.host.clone()),
            Some(self.holder.port.to_string()),
            Some(self.holder.system_identifier.clone()),
            Some(self.holder.data_directory.clone()),
            Some(gucs::worker_id().map_or(-1, |w| w as i64).to_string()),
            Some(self.layout.worker_bits().to_string()),
            Some(self.layout.sequence_bits().to_string()),
            Some(self.layout.epoch_ms().to_string()),
            Some(ttl.to_string()),
            Some(self.frontier_ms().to_string()),
        ];
        match self.query(CLAIM_SQL, &params) {
            Err(e) => {
                self.failed("could not claim a worker id", &e);
                // The role's limit is reached by a lease that runs out at
                // a time the registry names (a crashed run of this
                // server, say): ask again right then, not at the next
                // step of the back-off (issue 56: a restart after a crash
                // mints within one TTL of it).
                if e.sqlstate.as_deref() == Some("53400") {
                    if let Some(ms) = claim_retry_in_ms(&e.message) {
                        self.retry_at_ns = mono_ns() + (ms + 1).saturating_mul(1_000_000);
                    }
                }
            }
            Ok(rows) if rows.first().is_some_and(|r| r.iter().all(Option::is_none)) => {
                // Nothing granted, but the registry saw leases of another
                // clock for the first time and kept that: ask again now.
                self.retry_at_ns = mono_ns() + 10_000_000;
            }
            Ok(rows) if rows.is_empty() => {
                self.shared.exhausted.store(true, Ordering::Release);
                let e = Failure::local(format!(
                    "every worker id of the registry is held ({} ids with {} worker bits)",
                    1u64 << self.layout.worker_bits(),
                    self.layout.worker_bits()
                ));
                self.failed("could not claim a worker id", &e);
                // Not a transport failure: keep the connection, retry at
                // a third of the TTL.
                self.retry_at_ns = mono_ns() + (ttl / 3) * 1_000_000;
            }
            Ok(rows) => {
                let r = &rows[0];
                let (Some(w), Some(epoch), floor, Some(ru)) =
                    (parse(&r[0]), parse(&r[1]), parse(&r[2]), parse(&r[3]))
                else {
                    let e = Failure::local("the registry's claim returned NULLs");
                    return self.failed("could not claim a worker id", &e);
                };
                if w < 0 || w as u64 > self.layout.max_worker() {
                    let e = Failure::local(format!(
                        "the registry handed out worker id {w}, outside the layout"
                    ));
                    return self.failed("could not claim a worker id", &e);
                }
                self.succeeded();
                let l = Lease::granted(w as u64, epoch, ru, sent, ttl);
                self.take(l, floor.unwrap_or(i64::MIN), "claimed");
            }
        }
    }

    fn renew(&mut self, mut l: Lease) {
        let ttl = self.ttl_ms();
        let sent = mono_ns();
        let params = vec![
            Some(l.worker.to_string()),
            TOKEN.get().cloned(),
            Some(l.epoch.to_string()),
            Some(ttl.to_string()),
            Some(self.frontier_ms().to_string()),
        ];
        crate::failpoint!("lease-renewal-sent");
        let renewed = self.query(RENEW_SQL, &params);
        crate::failpoint!("lease-renewal-answered");
        match renewed {
            Err(e) => {
                self.failed("could not renew the lease", &e);
                if e.sqlstate.is_some() && !l.live(mono_ns()) {
                    // The registry answers, but not this renewal, and the
                    // lease ran out: claim another id rather than retry
                    // this one for ever.
                    self.lease = None;
                }
            }
            Ok(rows) => match rows.first().and_then(|r| parse(&r[0])) {
                None => {
                    // Lost: the id was taken over or retired, or the lease
                    // ran out in the registry (which renews live leases
                    // only). Claim again at once.
                    self.lease = None;
                    let why = format!(
                        "the lease of worker id {} (epoch {}) was taken over, retired or had run out in the registry",
                        l.worker, l.epoch
                    );
                    self.shared.last_error.set(&why);
                    self.shared.errors.fetch_add(1, Ordering::Relaxed);
                    self.drop_worker(&why);
                    self.retry_at_ns = i64::MIN;
                }
                Some(ru) => {
                    self.succeeded();
                    l.renewed(ru, sent, ttl);
                    if self.shared.worker.load(Ordering::Acquire) < 0 {
                        // Revived: the registry was unreachable past the
                        // deadline, and nobody took the id meanwhile.
                        self.take(l, i64::MIN, "renewed the expired lease of");
                    } else {
                        worker::extend(&l);
                        self.lease = Some(l);
                    }
                }
            },
        }
    }

    fn release(&mut self) {
        let Some(l) = self.lease.take() else { return };
        self.drop_worker("the server is shutting down");
        if self.conn.is_none() {
            return;
        }
        let params = vec![
            Some(l.worker.to_string()),
            TOKEN.get().cloned(),
            Some(l.epoch.to_string()),
        ];
        // Shutting down: the stop flag is set, so use a plain deadline.
        if let Some(c) = self.conn.as_mut() {
            let sql = RELEASE_SQL.replace("{schema}", &self.schema);
            match c.query(&sql, &params, Duration::from_millis(1_000), &|| false) {
                Ok(_) => log(
                    PgLogLevel::LOG,
                    format!("snowflake_id lease: released worker id {}", l.worker),
                ),
                Err(e) => log(
                    PgLogLevel::LOG,
                    format!(
                        "snowflake_id lease: could not release worker id {}: {e}; it expires by itself",
                        l.worker
                    ),
                ),
            }
        }
    }

    /// One pass: enforce the deadline, then claim or renew when due.
    /// Returns how long to sleep.
    fn tick(&mut self) -> Duration {
        let now = mono_ns();
        if let Some(l) = self.lease {
            if !l.live(now) && self.shared.worker.load(Ordering::Acquire) >= 0 {
                let why = format!(
                    "the lease of worker id {} ran out without a renewal{}",
                    l.worker,
                    self.shared
                        .last_error
                        .get()
                        .map(|e| format!(" ({e})"))
                        .unwrap_or_default()
                );
                self.drop_worker(&why);
            }
        }
        let wanted = self.shared.wanted.swap(false, Ordering::AcqRel);
        if now >= self.retry_at_ns || (wanted && self.failures == 0) {
            match self.lease {
                None => self.claim(),
                Some(l) => {
                    let expired = self.shared.worker.load(Ordering::Acquire) < 0;
                    if expired || wanted || l.renewal_due(now, self.frontier_ms()) {
                        self.renew(l);
                    }
                }
            }
        }
        // Sleep until the next renewal, the deadline or the next retry.
        let now = mono_ns();
        let mut wake = now + 1_000_000_000;
        if let Some(l) = self.lease {
            wake = wake.min(l.renew_at_ns());
            if self.shared.worker.load(Ordering::Acquire) >= 0 {
                wake = wake.min(l.deadline_ns());
            }
        } else {
            // No lease: claim now, or at the next retry (within a second).
            wake = wake.min(self.retry_at_ns.max(now));
        }
        if self.retry_at_ns != i64::MIN {
            wake = wake.max(self.retry_at_ns.min(now + 1_000_000_000));
        }
        Duration::from_nanos((wake - now).clamp(1_000_000, 1_000_000_000) as u64)
    }
}

/// The lease worker: claims, renews and releases this server's worker id.
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn snowflake_id_lease_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let (Some(state), Some(t), Ok(layout)) = (shmem::state(), shmem::tracking(), gucs::layout())
    else {
        return;
    };
    let shared = &t.lease;
    // SAFETY: publishing this process's latch (in its PGPROC) and
    // withdrawing it at exit.
    unsafe {
        shared
            .latch
            .store(pg_sys::MyLatch as usize, Ordering::Release);
        pg_sys::before_shmem_exit(Some(forget_worker), pg_sys::Datum::from(0));
    }
    let mut w = Worker {
        state,
        shared,
        layout,
        holder: holder(),
        conn: None,
        schema: String::new(),
        conninfo: gucs::registry_conninfo(),
        lease: None,
        failures: 0,
        retry_at_ns: i64::MIN,
    };
    let mut sleep = Duration::from_millis(1);
    loop {
        let alive = BackgroundWorker::wait_latch(Some(sleep));
        if !alive || stopping() {
            STOPPING.store(true, Ordering::Relaxed);
            break;
        }
        if BackgroundWorker::sighup_received() {
            // SAFETY: standard configuration reload in a background worker.
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
            let conninfo = gucs::registry_conninfo();
            if conninfo != w.conninfo {
                w.conninfo = conninfo;
                w.conn = None;
            }
        }
        sleep = w.tick();
    }
    w.release();
    // A worker that returns is not started again: exit with 1, so that
    // the postmaster restarts it after a termination that is not a
    // shutdown (at a shutdown nothing is restarted anyway).
    // SAFETY: proc_exit runs the exit callbacks and ends the process.
    unsafe { pg_sys::proc_exit(1) };
}

#[pg_guard]
unsafe extern "C-unwind" fn forget_worker(_code: std::ffi::c_int, _arg: pg_sys::Datum) {
    if let Some(l) = worker::shared() {
        l.latch.store(0, Ordering::Release);
        // Whatever ended the worker, nothing is minted under a lease that
        // nobody renews: the restarted worker claims again.
        worker::revoke();
    }
}
