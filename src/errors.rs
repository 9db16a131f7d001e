//! Mapping of every failure to a PostgreSQL error with a specific SQLSTATE,
//! PostgreSQL message style, and a HINT where the user can act.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::{PgLogLevel, PgSqlErrorCode};
use snowflake_id_core::base32::Base32Error;
use snowflake_id_core::{format_epoch, FormatError, GenError, IdError, FIELD_ORDERS, PRESET_NAMES};

/// Build and send a report: the one place every message of this extension
/// goes through. At ERROR and above it does not return.
pub fn report(
    level: PgLogLevel,
    code: PgSqlErrorCode,
    msg: impl Into<String>,
    detail: Option<String>,
    hint: Option<&str>,
) {
    let mut r = ErrorReport::new(code, msg.into(), "snowflake_id");
    if let Some(d) = detail {
        r = r.set_detail(d);
    }
    if let Some(h) = hint {
        r = r.set_hint(h);
    }
    r.report(level);
}

pub(crate) fn raise(
    code: PgSqlErrorCode,
    msg: impl Into<String>,
    detail: Option<String>,
    hint: Option<&str>,
) -> ! {
    report(PgLogLevel::ERROR, code, msg, detail, hint);
    unreachable!("ERROR does not return")
}

pub fn not_preloaded() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "snowflake_id must be loaded via \"shared_preload_libraries\" to generate IDs",
        Some("The generator's state lives in shared memory, which is only set up at server start. Decoding functions work without it.".into()),
        Some("Add snowflake_id to shared_preload_libraries in postgresql.conf and restart the server."),
    )
}

pub fn in_recovery() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_READ_ONLY_SQL_TRANSACTION,
        "cannot mint snowflake IDs during recovery",
        Some("This server is a standby, or is still recovering: IDs minted here would carry the same worker id as the primary's and could repeat them.".into()),
        Some("Mint IDs on the primary. Decoding and range functions work on standbys."),
    )
}

pub fn worker_id_unset() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "snowflake_id.worker_id is not set",
        Some("Every server that generates IDs needs its own worker id; a shared default would let servers mint colliding IDs.".into()),
        Some("Set snowflake_id.worker_id to a value unique among your servers in postgresql.conf (or with ALTER SYSTEM) and reload the configuration with SELECT pg_reload_conf()."),
    )
}

pub fn invalid_layout(msg: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        msg.to_string(),
        None,
        Some("Fix snowflake_id.epoch, snowflake_id.worker_bits or snowflake_id.sequence_bits in postgresql.conf and restart the server."),
    )
}

/// A configured `snowflake_id.*` value that its definition rejected: the
/// server refuses to start rather than use the default.
pub fn invalid_setting(msg: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        msg.to_string(),
        None,
        Some("Fix the value in postgresql.conf (or ALTER SYSTEM's postgresql.auto.conf) and restart the server: the server would otherwise use the default."),
    )
}

pub fn generation_blocked(msg: String, detail: String) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        msg,
        Some(detail),
        Some("Restore the previous settings (or the state file) and restart, or accept the new state with SELECT snowflake_accept_configuration() as a superuser."),
    )
}

/// `snowflake_accept_configuration()` of a held-back high-water mark at
/// or past the layout's last millisecond: applying it would exhaust the
/// ID space at once (issue 46: only the clock may).
pub fn far_mark_exhausts(mark_ms: i64, last_unix_ms: i64) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
        "the held-back snowflake_id high-water mark would exhaust the ID space",
        Some(format!(
            "The mark {} is at or past {}, the last millisecond the layout can represent; no ID could follow it.",
            format_epoch(mark_ms),
            format_epoch(last_unix_ms)
        )),
        Some("Discard it with SELECT snowflake_discard_high_water() as a superuser in the database that holds it: a real server's IDs never got there."),
    )
}

/// This database holds a high-water mark far ahead of the clock, held
/// back until a superuser decides (issue 55: other databases go on).
pub fn far_mark_here(detail: String, hint: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "snowflake_id high-water mark of this database is far ahead of the clock",
        Some(detail),
        Some(hint),
    )
}

/// An UPDATE, DELETE or TRUNCATE of the high-water table: only
/// snowflake_id writes its marks (issue 55).
pub fn high_water_by_hand(what: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        format!("cannot {what} snowflake_id_internal.snowflake_high_water"),
        Some("Its rows bound the IDs minted in this database; a mark lowered or removed by hand would let a later start (pg_upgrade, a lost state file) hand out IDs below ones already handed out.".into()),
        Some("A mark held back as far ahead of the clock is applied with SELECT snowflake_accept_configuration() or discarded with SELECT snowflake_discard_high_water(), as a superuser."),
    )
}

pub fn not_superuser() -> ! {
    must_be_superuser("accept a snowflake_id configuration")
}

/// Writing the state file failed while `what`.
pub fn state_file_write(path: &str, what: &str, e: std::io::Error) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_IO_ERROR,
        format!("could not write snowflake_id state file \"{path}\": {e}"),
        Some(format!(
            "While {what}. No ID beyond the last durable reservation is issued."
        )),
        None,
    )
}

/// A reservation the synchronous standbys did not confirm, when the
/// interrupt that ended the wait cannot be raised again (a cancel held off
/// by the caller).
pub fn reservation_not_confirmed() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_QUERY_CANCELED,
        "canceling the wait for the synchronous standbys to confirm the snowflake_id reservation",
        Some("No ID above the last confirmed reservation can be issued until a synchronous standby confirms a new one.".into()),
        Some("Check that the standbys named in synchronous_standby_names are connected and streaming."),
    )
}

pub fn worker_out_of_range(worker: u64, max: u64) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("snowflake_id.worker_id {worker} does not fit in the worker field"),
        Some(format!(
            "With the configured worker_bits the valid range is 0 .. {max}."
        )),
        Some("Change snowflake_id.worker_id and reload the configuration."),
    )
}

pub fn negative_count(count: i64) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("number of IDs requested must not be negative: {count}"),
        None,
        None,
    )
}

pub fn lastval_undefined() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "snowflake_lastval is not yet defined in this session",
        None,
        Some("Call snowflake_nextval() first, in this session: an insert whose key defaults to it does."),
    )
}

/// No key: `file` names the keys file as messages show it (see
/// `public_ids::keys_file`), never its full path.
pub fn no_public_keys(file: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "no key for public IDs is configured",
        Some(format!("The file {file} does not exist or holds no key.")),
        Some("Write a line VERSION:KEY to it, with a key of 64 hexadecimal digits (1:$(openssl rand -hex 32)), as the server's OS user with mode 0600; see docs/design.md."),
    )
}

/// The keys file is malformed; `why` names the entry, never its key.
pub fn bad_public_keys(file: &str, why: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "the keys of public IDs are invalid",
        Some(format!("In {file}, {why}.")),
        Some("Each entry is VERSION:KEY, a version from 0 to 31 and 64 hexadecimal digits, one per line."),
    )
}

pub fn public_keys_unreadable(file: &str, why: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_IO_ERROR,
        format!("could not read the keys of public IDs {file}: {why}"),
        None,
        Some("The file must be readable by the server's OS user."),
    )
}

pub fn public_keys_exposed(file: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("the keys of public IDs {file} are readable by every OS user"),
        None,
        Some("Make the file readable by the server's OS user only: chmod 600."),
    )
}

pub fn invalid_public_id(text: &str, why: &str) -> ! {
    let mut detail = why.to_string();
    if let Some(first) = detail.get(0..1) {
        detail = first.to_uppercase() + &detail[1..];
    }
    raise(
        PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
        format!("invalid public snowflake ID: \"{text}\""),
        Some(detail + "."),
        None,
    )
}

pub fn count_too_large(count: i64, max: i64) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("number of IDs requested must be at most {max}: {count}"),
        None,
        Some("Call snowflake_nextval(count) again for the rest."),
    )
}

pub fn timestamp_out_of_range(what: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
        format!("{what} out of range"),
        None,
        None,
    )
}

/// A timestamp in Unix ms as a DETAIL shows it; the extremes stand for the
/// infinite timestamps (see `decode::to_unix_ms`).
fn timestamp_text(unix_ms: i64) -> String {
    match unix_ms {
        i64::MIN => "-infinity".to_string(),
        i64::MAX => "infinity".to_string(),
        ms => format_epoch(ms),
    }
}

pub fn id_error(e: IdError) -> ! {
    match e {
        IdError::NegativeId(id) => raise(
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("snowflake ID {id} is negative"),
            Some("Snowflake IDs are non-negative 64-bit integers.".into()),
            None,
        ),
        IdError::OutsideFormat { id, bits } => raise(
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("ID {id} does not fit in a {bits}-bit layout"),
            Some("Bits are set above the timestamp, worker and sequence fields.".into()),
            Some("Check the layout: its field widths may be too narrow for this ID."),
        ),
        IdError::BeforeEpoch {
            unix_ms,
            epoch_ms,
            last_unix_ms,
        } => raise(
            PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
            "timestamp is before the snowflake epoch",
            Some(format!(
                "The timestamp {} is before the layout's epoch; snowflake IDs represent {} to {}.",
                timestamp_text(unix_ms),
                format_epoch(epoch_ms),
                format_epoch(last_unix_ms)
            )),
            None,
        ),
        IdError::PastEnd {
            unix_ms,
            epoch_ms,
            last_unix_ms,
        } => raise(
            PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
            "timestamp is beyond the range of snowflake IDs",
            Some(format!(
                "The timestamp {} is after the last millisecond the layout can represent; snowflake IDs represent {} to {}.",
                timestamp_text(unix_ms),
                format_epoch(epoch_ms),
                format_epoch(last_unix_ms)
            )),
            None,
        ),
        IdError::WorkerOutOfRange { worker, max } => raise(
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("worker id {worker} is out of range"),
            Some(format!("Valid worker ids are 0 .. {max}.")),
            None,
        ),
        IdError::SequenceOutOfRange { sequence, max } => raise(
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("sequence {sequence} is out of range"),
            Some(format!("Valid sequence numbers are 0 .. {max}.")),
            None,
        ),
        IdError::BeforeFirstId { id, first_id, detail } => raise(
            PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
            format!("ID {id} is older than the layout's first snowflake ID {first_id}"),
            Some(detail.into()),
            Some("Such an ID has no timestamp, worker or sequence to decode."),
        ),
        IdError::NotTimeOrdered => raise(
            PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
            "IDs of a layout with the worker field above the timestamp do not sort by time",
            Some("No single ID range holds a time range: each worker's IDs form a range of their own.".into()),
            Some("Bound each worker's range with snowflake_compose(ts, worker_id, 0, ...) and snowflake_compose(ts, worker_id, max_sequence, ...), or filter on the decoded ts."),
        ),
    }
}

pub fn generator_error(e: GenError) -> ! {
    match e {
        GenError::BeforeEpoch { unix_ms, epoch_ms } => raise(
            PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
            "current time is before the snowflake epoch",
            Some(format!(
                "The system clock reads {}, before snowflake_id.epoch {}.",
                format_epoch(unix_ms),
                format_epoch(epoch_ms)
            )),
            Some("Check the system clock, or set snowflake_id.epoch to a time in the past and restart the server."),
        ),
        GenError::Exhausted { last_unix_ms } => raise(
            PgSqlErrorCode::ERRCODE_DATETIME_FIELD_OVERFLOW,
            "snowflake ID space is exhausted",
            Some(format!(
                "The next ID would need a timestamp after {}, the last millisecond the layout can represent.",
                format_epoch(last_unix_ms)
            )),
            Some("Use a later snowflake_id.epoch or fewer worker and sequence bits; check that the system clock is right."),
        ),
        GenError::LeaseExpired { worker } => lease_expired(
            worker,
            "The lease was not renewed before its local deadline.".into(),
        ),
        GenError::WorkerNotHeld { worker } => raise(
            PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            "no worker id is leased from the snowflake_id registry",
            Some(format!("This server's lease of worker id {worker} was lost or changed hands while the ID was being made.")),
            Some("Retry: the lease worker claims a worker id again as soon as the registry answers; see snowflake_stats()."),
        ),
    }
}

/// A layout given by name or by explicit widths is invalid.
pub fn invalid_format(e: &FormatError) -> ! {
    let (detail, hint) = match e {
        FormatError::UnknownPreset(_) => (
            None,
            format!("Use one of {PRESET_NAMES}, or give the epoch and field widths explicitly."),
        ),
        FormatError::UnknownFieldOrder(_) => (
            None,
            format!("Name the three fields from the high bits to the low ones: {FIELD_ORDERS}."),
        ),
        FormatError::TimeUnit(_) => (
            None,
            "Give the time unit as an interval such as '1 ms', '10 ms' or '1 s'.".to_string(),
        ),
        FormatError::FieldTooWideForInteger { .. } => (
            Some("snowflake_decode returns worker_id and sequence as integer, which holds at most 31 bits.".into()),
            "Extract a wider field with shifts and masks on the bigint, for example (id >> sequence_bits) & ((1::bigint << worker_bits) - 1).".to_string(),
        ),
        _ => (
            None,
            "Give an epoch between 1970 and 9999 and field widths that add up to at most 64 bits."
                .to_string(),
        ),
    };
    raise(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        e.to_string(),
        detail,
        Some(&hint),
    )
}

/// Encoding or decoding the base32 form failed; `input` is the text being
/// decoded, if any.
pub fn base32_error(e: Base32Error, input: Option<&str>) -> ! {
    let input = input.unwrap_or_default();
    let detail = match e {
        Base32Error::Negative(id) => id_error(IdError::NegativeId(id)),
        Base32Error::OutOfRange => raise(
            PgSqlErrorCode::ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            format!("value \"{input}\" is out of range for type bigint"),
            None,
            None,
        ),
        Base32Error::Empty => "The text has no base32 symbols.".to_string(),
        Base32Error::TooLong(n) => format!("The text has {n} symbols; an ID has at most 13."),
        Base32Error::InvalidChar { ch, at } => format!(
            "Character {ch:?} at position {} is not a Crockford base32 symbol.",
            at + 1
        ),
    };
    raise(
        PgSqlErrorCode::ERRCODE_INVALID_TEXT_REPRESENTATION,
        format!("invalid input syntax for a base32 snowflake ID: \"{input}\""),
        Some(detail),
        Some("Use the 13-symbol Crockford base32 form that snowflake_to_base32() returns."),
    )
}

pub fn undefined_table(oid: u32) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_UNDEFINED_TABLE,
        format!("relation with OID {oid} does not exist"),
        None,
        None,
    )
}

/// The caller does not have the privileges of the table's owner.
pub fn not_owner(what: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        format!("must be owner of table {what}"),
        Some("The conversion's statements run as the table's owner; only its owner, a member of the owning role, or a superuser may run them.".into()),
        None,
    )
}

/// A write to `snowflake_convert_progress` from outside the online
/// conversion's own functions.
pub fn progress_write_refused() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        "snowflake_convert_progress can only be changed by the online conversion's functions",
        Some("Its rows tell the conversion what to do next; a row written by hand could make another role's conversion act on the wrong objects.".into()),
        Some("Use CALL snowflake_convert_online() to go on, or snowflake_convert_online_abandon() to back out."),
    )
}

/// A statement `snowflake_convert_as_owner` cannot run, or whose result is
/// not a bigint.
pub fn as_owner_failed(stmt: &str, e: pgrx::spi::Error) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        format!("snowflake_convert_as_owner cannot run this statement: {e}"),
        Some(format!("The statement was: {stmt}")),
        Some("Pass one SQL statement, not a transaction command or COPY; a statement that returns rows must return a bigint first column."),
    )
}

/// An SPI failure that is not a PostgreSQL ERROR (those propagate as
/// they are): a result of an unexpected shape.
pub fn spi_failed(what: &str, e: pgrx::spi::Error) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_DATA_EXCEPTION,
        format!("{what} returned an unexpected result: {e}"),
        None,
        None,
    )
}

/// A function of the extension called where the extension is not
/// installed (its library loaded by hand).
pub fn not_installed() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "extension \"snowflake_id\" is not installed in this database",
        None,
        Some("Run CREATE EXTENSION snowflake_id."),
    )
}

/// A superuser-only function called by another role.
/// `snowflake_high_water()` called by a role that may not read the table
/// behind it (issue 55).
pub fn high_water_not_readable() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        "permission denied to read the snowflake_id high-water mark",
        Some("Only roles that may read snowflake_id_internal.snowflake_high_water (the database's owner, superusers) and members of pg_read_all_stats may.".into()),
        Some("Grant the role pg_read_all_stats, or ask the database's owner."),
    )
}

pub fn must_be_superuser(to_do: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        format!("must be superuser to {to_do}"),
        None,
        None,
    )
}

/// The marks of every database were not read in time after a start that
/// needs them (no state file, a state file of another cluster or an
/// unusable one, a crash): no ID may be handed out below what any
/// database holds (`crate::high_water`).
pub fn high_water_unavailable(detail: String) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "snowflake_id high-water mark is not available",
        Some(detail),
        Some("Try again in a moment: after a start without a state file (pg_upgrade, a lost file), no ID is handed out until the marks of every database have been read. The server log says when the read began and why a database could not be read."),
    )
}

/// This database's high-water mark could not be raised above the next
/// ID: its table's lock was not granted in time (`crate::high_water`).
/// Other databases go on.
pub fn high_water_locked_here() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE,
        "could not raise the snowflake_id high-water mark in this database",
        Some("Another session holds, or waits for, a lock on snowflake_id_internal.snowflake_high_water that conflicts with the mark's write, so IDs handed out here now might not be carried by a dump of this database. Other databases go on.".into()),
        Some("Find the session in pg_locks (a VACUUM FULL, an ALTER or a LOCK on that table, or a lock request queued behind an open transaction) and end it."),
    )
}

/// This database's mark row is being updated or deleted by a transaction
/// that has not ended (a superuser's, with the table's triggers
/// disabled): a raise of it would be lost at its commit, so nothing is
/// minted here until it ends (issue 55).
pub fn high_water_row_busy() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "snowflake_id high-water mark of this database is being changed by another transaction",
        Some("A transaction that has not ended updated or deleted the row of snowflake_id_internal.snowflake_high_water that covers the IDs minted here; a raise of it would be lost when that transaction commits. Other databases go on.".into()),
        Some("End that transaction (see pg_locks and pg_stat_activity); the marks are written by snowflake_id alone."),
    )
}

/// A database whose marks could not be read after a start that needs
/// them, and that could not read its own mark either: no ID here.
pub fn high_water_lags_here() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "snowflake_id high-water mark of this database has not been read since start-up",
        Some("Its mark was not read when the server started, and could not be read now. Other databases go on.".into()),
        Some("See the server log; IDs are handed out here as soon as the mark can be read."),
    )
}

/// The high-water table was altered (a superuser's ALTER TABLE): its row
/// cannot be raised safely.
pub fn high_water_table_altered() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "snowflake_id_internal.snowflake_high_water does not have the columns snowflake_id created",
        Some("Its high-water mark cannot be raised, so no ID is handed out in this database.".into()),
        Some("Reinstall the extension in this database (DROP EXTENSION snowflake_id CASCADE; CREATE EXTENSION snowflake_id), or restore the table's columns."),
    )
}

/// The first ID of a new configuration in this database, minted by a
/// parallel worker, which cannot insert the mark's row.
pub fn high_water_row_in_parallel() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INVALID_TRANSACTION_STATE,
        "cannot create this database's snowflake_id high-water mark in a parallel worker",
        Some("This database holds no mark for the server's worker id and layout yet.".into()),
        Some("Call SELECT snowflake_nextval() once outside a parallel query (or SELECT snowflake_write_high_water() as a superuser)."),
    )
}

/// The server's worker id is leased, and no lease is held now
/// (`crate::lease`).
pub fn no_lease(detail: String, exhausted: bool) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "no worker id is leased from the snowflake_id registry",
        Some(detail),
        Some(if exhausted {
            "Every worker id of the registry is held by a live server; the id of a server that stopped without releasing it comes back one snowflake_id.lease_ttl later. For more servers, give the fleet more worker ids: a registry initialized with more worker_bits, and snowflake_id.worker_bits to match."
        } else {
            "The lease worker claims a worker id again as soon as the registry answers; see snowflake_stats() and the server log."
        }),
    )
}

/// The lease of `worker` reached its local deadline without a renewal.
pub fn lease_expired(worker: u64, detail: String) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("the lease of worker id {worker} ran out without a renewal"),
        Some(detail),
        Some("This server mints nothing under a lease past its deadline, whatever its lease worker is doing; it mints again once the registry renews the lease or grants another id. Check that the registry answers; see snowflake_stats() and the server log."),
    )
}

/// The lease's reservation in the registry does not reach the timestamp
/// the next ID needs, and could not be raised in time.
pub fn lease_does_not_cover(detail: String) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "the worker-id lease does not cover the next ID",
        Some(detail),
        Some("The lease worker raises the reservation in the registry every third of snowflake_id.lease_ttl; check that the registry answers, and that this server's clock is not far ahead of the registry's."),
    )
}

// --- adopted sequences (issue 57, `crate::adopt`) ------------------------

/// No run of `len` consecutive IDs within `tries` blocks (others' blocks
/// kept landing in between).
pub fn no_run(len: u64, tries: u32) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("could not take {len} consecutive IDs"),
        Some(format!(
            "{tries} blocks in a row were cut short or crossed a millisecond while other sessions took IDs."
        )),
        Some("Try again, or lower the sequence's INCREMENT BY."),
    )
}

/// `DROP DATABASE`, or `DROP EXTENSION snowflake_id`, of a database
/// whose marks of earlier starts are not applied (issue 62): nothing
/// could carry them.
pub fn drop_unread(what: &str, why: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("cannot {what} while its snowflake_id high-water mark is {why}"),
        Some("Its mark may cover IDs that no other database's mark or the state file covers; dropping it now could let the server mint below them.".into()),
        Some(if why == "held back" {
            "A superuser decides first: SELECT snowflake_accept_configuration() if the mark is right, SELECT snowflake_discard_high_water() in that database if not."
        } else {
            "The high-water launcher reads it again every second; try again shortly, and see the server log if it keeps failing."
        }),
    )
}
