//! Configuration parameters (`snowflake_id.*`).
//!
//! | name            | context    | default                  |
//! |-----------------|------------|--------------------------|
//! | `worker_id`     | sighup     | -1 (unset)               |
//! | `epoch`         | postmaster | `2024-01-01 00:00:00+00` |
//! | `worker_bits`   | postmaster | 10                       |
//! | `sequence_bits` | postmaster | 12                       |
//! | `max_lead`      | sighup     | 1000 ms                  |
//! | `bulk_lead_share` | sighup   | 50 (%)                   |
//! | `public_keys_file` | postmaster, superuser only | empty: `$PGDATA/snowflake_id.public_keys` |
//! | `worker_id_source` | postmaster | `static`                |
//! | `registry`      | sighup, superuser only | empty            |
//! | `lease_ttl`     | sighup     | 15000 ms                 |
//!
//! None of them can be set per session, per role or per database: SIGHUP
//! and POSTMASTER parameters are only read from the configuration files.
//! `public_keys_file` is shown only to superusers and members of
//! `pg_read_all_settings` (where the keys of public IDs are is nobody
//! else's business), and like the layout it is a SIGHUP parameter when the
//! library is not preloaded.
//!
//! The layout parameters are validated once per process and cached; being
//! POSTMASTER parameters they cannot change while the process lives.
//!
//! This module depends on nothing else in the extension: whether the
//! library is being preloaded is passed to [`define`], and callers turn a
//! layout problem into their own ERROR ([`layout_or`]).

use parking_lot::Mutex;
use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting, PostgresGucEnum};
use pgrx::pg_sys;
use snowflake_id_core::{parse_epoch, Layout, LayoutError};
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

pub const WORKER_ID_UNSET: i32 = -1;
pub const DEFAULT_EPOCH: &CStr = c"2024-01-01 00:00:00+00";
/// Upper bound of `max_lead`: one hour.
pub const MAX_LEAD_LIMIT_MS: i32 = 3_600_000;
/// Widest field we accept for worker or sequence bits; with both at least 1
/// and the timestamp at least 35 bits, neither can exceed 27.
pub const MAX_FIELD_BITS: i32 = 27;

pub static WORKER_ID: GucSetting<i32> = GucSetting::<i32>::new(WORKER_ID_UNSET);
pub static EPOCH: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(DEFAULT_EPOCH));
pub static WORKER_BITS: GucSetting<i32> =
    GucSetting::<i32>::new(Layout::DEFAULT_WORKER_BITS as i32);
pub static SEQUENCE_BITS: GucSetting<i32> =
    GucSetting::<i32>::new(Layout::DEFAULT_SEQUENCE_BITS as i32);
pub static MAX_LEAD_MS: GucSetting<i32> = GucSetting::<i32>::new(1000);
/// The share of `max_lead`, in percent, that one `snowflake_nextval(count)`
/// call may take ahead of the clock.
pub static BULK_LEAD_SHARE: GucSetting<i32> = GucSetting::<i32>::new(50);
/// The file with the keys of public IDs, an absolute path outside the data
/// directory; empty (the default): `$PGDATA/snowflake_id.public_keys`.
pub static PUBLIC_KEYS_FILE: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);

/// Where the worker id comes from.
#[derive(PostgresGucEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum WorkerIdSource {
    /// `snowflake_id.worker_id`, set by hand.
    #[name = c"static"]
    Static,
    /// Leased from the registry that `snowflake_id.registry` names.
    #[name = c"registry"]
    Registry,
}

pub static WORKER_ID_SOURCE: GucSetting<WorkerIdSource> =
    GucSetting::<WorkerIdSource>::new(WorkerIdSource::Static);
/// The libpq connection string of the registry database.
pub static REGISTRY: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(None);
/// The length of a lease, ms.
pub static LEASE_TTL_MS: GucSetting<i32> = GucSetting::<i32>::new(15_000);
/// Whether `snowflake_adopt_sequences()` is on in this database: set by
/// it, per database, for the view `snowflake_adopting_databases`.
pub static ADOPT_SEQUENCES: GucSetting<bool> = GucSetting::<bool>::new(false);
/// The widest worker-id field a registry hands out (65,536 rows).
pub const MAX_LEASED_WORKER_BITS: u32 = 16;

const NAMES: [&CStr; 9] = [
    c"snowflake_id.worker_id_source",
    c"snowflake_id.lease_ttl",
    c"snowflake_id.worker_id",
    c"snowflake_id.epoch",
    c"snowflake_id.worker_bits",
    c"snowflake_id.sequence_bits",
    c"snowflake_id.max_lead",
    c"snowflake_id.bulk_lead_share",
    c"snowflake_id.public_keys_file",
];

/// The value a parameter had in the configuration before we defined it
/// (PostgreSQL keeps it in a placeholder). If our definition rejects it,
/// PostgreSQL only logs a WARNING and falls back to the default; for the
/// layout and the worker id that would silently change the IDs we mint, so
/// `_PG_init` compares and refuses to start instead.
fn placeholder_value(name: &CStr) -> Option<String> {
    // SAFETY: GetConfigOption with missing_ok returns NULL or a valid string.
    unsafe {
        let p = pg_sys::GetConfigOption(name.as_ptr(), true, false);
        (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn check_epoch(
    newval: *mut *mut std::ffi::c_char,
    _extra: *mut *mut std::ffi::c_void,
    _source: pg_sys::GucSource::Type,
) -> bool {
    // SAFETY: PostgreSQL passes a valid pointer to a (possibly NULL) string.
    let value = unsafe {
        (*newval)
            .as_ref()
            .map(|p| CStr::from_ptr(p).to_string_lossy())
    };
    let Some(value) = value else {
        return false;
    };
    match parse_epoch(&value)
        .map_err(|e| e.to_string())
        .and_then(|ms| Layout::new(ms, 1, 1).map(|_| ()).map_err(|e| e.to_string()))
    {
        Ok(()) => true,
        Err(msg) => {
            set_check_detail(&msg);
            false
        }
    }
}

/// `public_keys_file`: empty, or an absolute path outside the data
/// directory (where every base backup would copy it).
#[pgrx::pg_guard]
unsafe extern "C-unwind" fn check_public_keys_file(
    newval: *mut *mut std::ffi::c_char,
    _extra: *mut *mut std::ffi::c_void,
    _source: pg_sys::GucSource::Type,
) -> bool {
    // SAFETY: PostgreSQL passes a valid pointer to a (possibly NULL) string.
    let value = unsafe {
        (*newval)
            .as_ref()
            .map(|p| CStr::from_ptr(p).to_string_lossy().into_owned())
    };
    let Some(value) = value.filter(|v| !v.is_empty()) else {
        return true;
    };
    let path = std::path::Path::new(&value);
    if !path.is_absolute() {
        set_check_detail("the file of the keys of public IDs must be named by an absolute path");
        return false;
    }
    // SAFETY: DataDir is NULL or a valid string (set before the
    // configuration file is read, in the postmaster and every backend).
    let data_dir = unsafe {
        (!pg_sys::DataDir.is_null()).then(|| {
            CStr::from_ptr(pg_sys::DataDir)
                .to_string_lossy()
                .into_owned()
        })
    };
    if data_dir.is_some_and(|d| path.starts_with(d)) {
        set_check_detail("it is inside the data directory, where every base backup copies it; name a file outside it");
        return false;
    }
    true
}

/// Report `msg` as the DETAIL of a rejected value, as a capitalised sentence.
fn set_check_detail(msg: &str) {
    let mut detail: String = msg.replace('\0', " ");
    if let Some(first) = detail.get(0..1) {
        detail = first.to_uppercase() + &detail[1..];
    }
    detail.push('.');
    let c = CString::new(detail).unwrap_or_default();
    // SAFETY: GUC_check_errdetail_string must be palloc'd; pstrdup does that.
    unsafe {
        pg_sys::GUC_check_errcode(pgrx::PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE as i32);
        pg_sys::GUC_check_errdetail_string = pg_sys::pstrdup(c.as_ptr());
    }
}

/// Whether the layout parameters were defined as POSTMASTER parameters
/// (the library is preloaded), so that the layout cannot change while the
/// server runs and may be cached. Set in the postmaster, inherited.
static LAYOUT_FIXED: AtomicBool = AtomicBool::new(false);

/// Define every parameter. `preloading` says whether the library is being
/// loaded through `shared_preload_libraries`. Returns the problems found
/// with values that the configuration gave but our definitions rejected.
pub fn define(preloading: bool) -> Vec<String> {
    LAYOUT_FIXED.store(preloading, Ordering::Relaxed);
    let before: Vec<Option<String>> = NAMES.iter().map(|n| placeholder_value(n)).collect();
    // PostgreSQL cannot create POSTMASTER parameters after start-up. When
    // the library is loaded on demand (not preloaded) only the decoders can
    // run, and the layout parameters are read from the configuration files
    // as SIGHUP parameters instead.
    let layout_context = || {
        if preloading {
            GucContext::Postmaster
        } else {
            GucContext::Sighup
        }
    };

    GucRegistry::define_int_guc(
        c"snowflake_id.worker_bits",
        c"Width in bits of the worker-id field of generated IDs.",
        c"Set at server start. The timestamp field gets 63 - worker_bits - sequence_bits bits, which must be at least 35.",
        &WORKER_BITS,
        1,
        MAX_FIELD_BITS,
        layout_context(),
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"snowflake_id.sequence_bits",
        c"Width in bits of the per-millisecond sequence field of generated IDs.",
        c"Set at server start. 2^sequence_bits IDs fit in one millisecond.",
        &SEQUENCE_BITS,
        1,
        MAX_FIELD_BITS,
        layout_context(),
        GucFlags::default(),
    );
    // SAFETY: check_epoch is #[pg_guard]ed.
    unsafe {
        GucRegistry::define_string_guc_with_hooks(
            c"snowflake_id.epoch",
            c"Start of the time encoded in generated IDs.",
            c"Set at server start. Either 'YYYY-MM-DD[ HH:MM[:SS[.mmm]]][zone]' (UTC when no zone is given) or an integer number of milliseconds since 1970-01-01 UTC.",
            &EPOCH,
            layout_context(),
            GucFlags::default(),
            Some(check_epoch),
            None,
            None,
        );
    }
    let worker_bits = WORKER_BITS.get().clamp(1, 30);
    GucRegistry::define_int_guc(
        c"snowflake_id.worker_id",
        c"Worker id of this server, embedded in every generated ID.",
        c"Must be unique among all servers whose IDs can ever meet. -1 means unset: snowflake_nextval() refuses to run until it is set. Valid range 0 .. 2^worker_bits - 1.",
        &WORKER_ID,
        WORKER_ID_UNSET,
        (1i32 << worker_bits) - 1,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"snowflake_id.max_lead",
        c"How far generated IDs may run ahead of the clock during bursts.",
        c"When sustained demand exceeds 2^sequence_bits IDs per millisecond, IDs borrow future milliseconds up to this bound; beyond it callers sleep until the clock catches up. 0 means never borrow.",
        &MAX_LEAD_MS,
        0,
        MAX_LEAD_LIMIT_MS,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );
    GucRegistry::define_int_guc(
        c"snowflake_id.bulk_lead_share",
        c"Share of max_lead, in percent, that one snowflake_nextval(count) call may take.",
        c"A bulk call takes IDs at most this share of snowflake_id.max_lead ahead of the clock, then waits for the clock, so that the rest of the lead stays free for every other caller. 100 lets one call take the whole lead.",
        &BULK_LEAD_SHARE,
        1,
        100,
        GucContext::Sighup,
        GucFlags::default(),
    );

    // SAFETY: check_public_keys_file is #[pg_guard]ed.
    unsafe {
        GucRegistry::define_string_guc_with_hooks(
            c"snowflake_id.public_keys_file",
            c"File with the keys of public IDs, outside the data directory.",
            c"Set at server start, to an absolute path outside the data directory that the server's OS user can read (and, best, not write). Empty: the file snowflake_id.public_keys of the data directory, which base backups copy.",
            &PUBLIC_KEYS_FILE,
            layout_context(),
            GucFlags::SUPERUSER_ONLY,
            Some(check_public_keys_file),
            None,
            None,
        );
    }

    GucRegistry::define_enum_guc(
        c"snowflake_id.worker_id_source",
        c"Where the worker id comes from: static (snowflake_id.worker_id) or registry (leased).",
        c"Set at server start. With registry, the worker id is leased from the registry database that snowflake_id.registry names, and snowflake_id.worker_id is only the preferred id.",
        &WORKER_ID_SOURCE,
        layout_context(),
        GucFlags::default(),
    );
    GucRegistry::define_string_guc(
        c"snowflake_id.registry",
        c"Connection string of the registry database that leases worker ids.",
        c"A libpq connection string. Keep passwords in a password file, not here.",
        &REGISTRY,
        GucContext::Sighup,
        GucFlags::SUPERUSER_ONLY,
    );
    GucRegistry::define_int_guc(
        c"snowflake_id.lease_ttl",
        c"Length of a worker-id lease.",
        c"The lease is renewed every third of it; a server that cannot renew stops minting when it runs out. The reservation in the registry runs this far ahead of the IDs.",
        &LEASE_TTL_MS,
        snowflake_id_core::lease::MIN_TTL_MS as i32,
        600_000,
        GucContext::Sighup,
        GucFlags::UNIT_MS,
    );

    GucRegistry::define_bool_guc(
        c"snowflake_id.adopt_sequences",
        c"Shows whether snowflake_adopt_sequences() is on in this database.",
        c"Set by snowflake_adopt_sequences() with ALTER DATABASE, for the view snowflake_adopting_databases. Setting it by hand switches nothing: the switch is the database's row in snowflake_id_internal.snowflake_adopt_switch.",
        &ADOPT_SEQUENCES,
        GucContext::Suset,
        GucFlags::default(),
    );

    // An unknown snowflake_id.* setting is an error.
    // SAFETY: plain C call with a static string.
    unsafe {
        pg_sys::MarkGUCPrefixReserved(c"snowflake_id".as_ptr());
    }

    let mut problems = vec![];
    for (name, was) in NAMES.iter().zip(before) {
        let Some(was) = was else { continue };
        if !keeps_configured_value(name, &was) {
            problems.push(format!(
                "invalid value \"{was}\" for parameter \"{}\"",
                name.to_string_lossy()
            ));
        }
    }
    problems
}

/// Did the defined parameter take the configured value? (If PostgreSQL
/// rejected it, the parameter holds its default instead.)
fn keeps_configured_value(name: &CStr, configured: &str) -> bool {
    if name == c"snowflake_id.public_keys_file" {
        return public_keys_file().unwrap_or_default().as_os_str() == configured;
    }
    if name == c"snowflake_id.epoch" {
        let now = EPOCH.get().map(|c| c.to_string_lossy().into_owned());
        return match (parse_epoch(configured), now.as_deref().map(parse_epoch)) {
            (Ok(a), Some(Ok(b))) => a == b,
            _ => false,
        };
    }
    if name == c"snowflake_id.worker_id_source" {
        let want = match configured.trim().to_ascii_lowercase().as_str() {
            "static" => WorkerIdSource::Static,
            "registry" => WorkerIdSource::Registry,
            _ => return false,
        };
        return WORKER_ID_SOURCE.get() == want;
    }
    let (setting, flags) = if name == c"snowflake_id.lease_ttl" {
        (&LEASE_TTL_MS, pg_sys::GUC_UNIT_MS as i32)
    } else if name == c"snowflake_id.worker_id" {
        (&WORKER_ID, 0)
    } else if name == c"snowflake_id.worker_bits" {
        (&WORKER_BITS, 0)
    } else if name == c"snowflake_id.sequence_bits" {
        (&SEQUENCE_BITS, 0)
    } else if name == c"snowflake_id.bulk_lead_share" {
        (&BULK_LEAD_SHARE, 0)
    } else {
        (&MAX_LEAD_MS, pg_sys::GUC_UNIT_MS as i32)
    };
    let Ok(c) = CString::new(configured) else {
        return false;
    };
    let mut parsed = 0i32;
    // SAFETY: parse_int reads a valid C string and writes an int.
    let ok = unsafe { pg_sys::parse_int(c.as_ptr(), &mut parsed, flags, std::ptr::null_mut()) };
    ok && parsed == setting.get()
}

/// Layout of a server that preloads the library: its parameters are
/// POSTMASTER, so it is computed once (in the postmaster) and inherited.
/// Only a valid layout is cached (an invalid one stops the server first).
static FROZEN_LAYOUT: OnceLock<Layout> = OnceLock::new();

type LayoutKey = (Option<CString>, i32, i32);
/// Layout of a backend that loaded the library on demand: its parameters
/// are SIGHUP, so the cache is keyed by their values. Process-local.
static RELOADABLE_LAYOUT: Mutex<Option<(LayoutKey, Result<Layout, String>)>> =
    parking_lot::const_mutex(None);

/// Validate the layout parameters as they are now.
fn compute_layout() -> Result<Layout, String> {
    let epoch = EPOCH
        .get()
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_else(|| DEFAULT_EPOCH.to_string_lossy().into_owned());
    let epoch_ms =
        parse_epoch(&epoch).map_err(|e| format!("invalid snowflake_id.epoch \"{epoch}\": {e}"))?;
    Layout::new(
        epoch_ms,
        WORKER_BITS.get() as u32,
        SEQUENCE_BITS.get() as u32,
    )
    .map_err(|e: LayoutError| format!("invalid snowflake_id layout: {e}"))
}

/// The layout fixed at server start, once a call has computed it: `None`
/// before that, and where the layout may be reloaded. Never computes,
/// locks or fails (the entry point of `snowflake_nextval()` reads it
/// before pgrx's error guard).
#[inline(always)]
pub fn fixed_layout() -> Option<Layout> {
    if LAYOUT_FIXED.load(Ordering::Relaxed) {
        FROZEN_LAYOUT.get().copied()
    } else {
        None
    }
}

/// The layout of this server. On a server that preloads the library the
/// first valid answer is cached for the life of the process (the postmaster
/// computes it once in `_PG_init`, and every backend inherits it).
#[inline]
pub fn layout() -> Result<Layout, String> {
    if LAYOUT_FIXED.load(Ordering::Relaxed) {
        if let Some(l) = FROZEN_LAYOUT.get() {
            return Ok(*l);
        }
        let l = compute_layout()?;
        return Ok(*FROZEN_LAYOUT.get_or_init(|| l));
    }
    let key = (EPOCH.get(), WORKER_BITS.get(), SEQUENCE_BITS.get());
    let mut cache = RELOADABLE_LAYOUT.lock();
    match &*cache {
        Some((k, v)) if *k == key => v.clone(),
        _ => {
            let v = compute_layout();
            *cache = Some((key, v.clone()));
            v
        }
    }
}

/// The layout, or `fail(message)` (which raises the caller's ERROR). The
/// frozen layout of a preloading server (the hot path of
/// `snowflake_nextval()`) is one load.
#[inline(always)]
pub fn layout_or(fail: fn(&str) -> !) -> Layout {
    match FROZEN_LAYOUT.get() {
        Some(l) => *l,
        None => layout_slow(fail),
    }
}

#[cold]
#[inline(never)]
fn layout_slow(fail: fn(&str) -> !) -> Layout {
    layout().unwrap_or_else(|msg| fail(&msg))
}

/// The value of an integer GUC, read directly. `GucSetting::get` first
/// checks that it runs on the thread that loaded the library; these are
/// only called from SQL functions, which PostgreSQL runs on its only
/// thread, so the hot path skips that check (a thread-local lookup).
#[inline(always)]
fn int_guc(setting: &GucSetting<i32>) -> i32 {
    // SAFETY: the variable is PostgreSQL's GUC storage, written only by
    // PostgreSQL's GUC code on this backend's (only) thread, never while
    // this function runs.
    unsafe { *setting.as_ptr() }
}

/// Whether the worker id is leased from a registry
/// (`snowflake_id.worker_id_source = registry`).
#[inline(always)]
pub fn leased() -> bool {
    WORKER_ID_SOURCE.get() == WorkerIdSource::Registry
}

/// The registry's connection string; empty when unset.
pub fn registry_conninfo() -> String {
    REGISTRY
        .get()
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The length of a lease, ms.
pub fn lease_ttl_ms() -> i64 {
    (int_guc(&LEASE_TTL_MS) as i64).max(snowflake_id_core::lease::MIN_TTL_MS)
}

/// The configured worker id, if set: the server's worker id where it is
/// static, the preferred id where it is leased.
#[inline(always)]
pub fn worker_id() -> Option<u64> {
    let w = int_guc(&WORKER_ID);
    (w >= 0).then_some(w as u64)
}

#[inline(always)]
pub fn max_lead_ms() -> u64 {
    int_guc(&MAX_LEAD_MS).max(0) as u64
}

/// The file of the keys of public IDs that `snowflake_id.public_keys_file`
/// names, or `None` for the default, `$PGDATA/snowflake_id.public_keys`.
pub fn public_keys_file() -> Option<std::path::PathBuf> {
    PUBLIC_KEYS_FILE
        .get()
        .map(|c| c.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .map(std::path::PathBuf::from)
}

/// How far ahead of the clock one `snowflake_nextval(count)` call may
/// take IDs: `bulk_lead_share` percent of `max_lead_ms`, rounded down.
pub fn bulk_lead_ms(max_lead_ms: u64) -> u64 {
    max_lead_ms * int_guc(&BULK_LEAD_SHARE).clamp(1, 100) as u64 / 100
}

/// Set PostgreSQL's setting `name` to `value` for this backend at a new
/// GUC nest level, as a function's `SET` clause does (assign hooks run);
/// returns the level to give [`pop_settings`]. `superuser_only` uses the
/// superuser context, for settings a session could not set itself.
pub fn push_setting(name: &CStr, value: &CStr, superuser_only: bool) -> i32 {
    let context = if superuser_only {
        pg_sys::GucContext::PGC_SUSET
    } else {
        pg_sys::GucContext::PGC_USERSET
    };
    // SAFETY: the standard sequence of fmgr_security_definer for a SET
    // clause; an ERROR here aborts the (sub)transaction, which pops it.
    unsafe {
        let nest = pg_sys::NewGUCNestLevel();
        pg_sys::set_config_option(
            name.as_ptr(),
            value.as_ptr(),
            context,
            pg_sys::GucSource::PGC_S_SESSION,
            pg_sys::GucAction::GUC_ACTION_SAVE,
            true,
            0,
            false,
        );
        nest
    }
}

/// Set PostgreSQL's setting `name` to `value` for the rest of this
/// process, above the configuration file (a reload keeps it). For a
/// process that runs outside any transaction, such as the reservation
/// worker, where [`push_setting`] cannot save the old value: PostgreSQL
/// keeps saved values in the transaction's memory.
pub fn pin_setting(name: &CStr, value: &CStr) {
    // SAFETY: a plain SET at GUC nest level 0 saves nothing; the source
    // PGC_S_OVERRIDE outranks the configuration file and a reload.
    unsafe {
        pg_sys::set_config_option(
            name.as_ptr(),
            value.as_ptr(),
            pg_sys::GucContext::PGC_SUSET,
            pg_sys::GucSource::PGC_S_OVERRIDE,
            pg_sys::GucAction::GUC_ACTION_SET,
            true,
            0,
            false,
        );
    }
}

/// Restore every setting pushed at `nest` or above ([`push_setting`]).
pub fn pop_settings(nest: i32) {
    // SAFETY: pops the nest levels pushed by push_setting.
    unsafe { pg_sys::AtEOXact_GUC(false, nest) };
}
