//! The errors of adopted sequences (issue 57, issue 63): `nextval()` and
//! its kin on an adopted sequence, the labels that carry adoption, the
//! guards of DDL on adopted sequences, and `EXECUTE`'s parameters; and,
//! re-exported, the rest of [`crate::errors`], whose style, `raise` and
//! `report` they share.

pub use crate::errors::*;
use pgrx::{PgLogLevel, PgSqlErrorCode};

/// An adopted sequence whose increment needs more consecutive IDs than
/// half a millisecond holds.
pub fn increment_too_large(seq: &str, increment: i64, max: u64) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("INCREMENT BY {increment} of adopted sequence \"{seq}\" is too large for Snowflake IDs"),
        Some(format!(
            "One nextval() reserves the {increment} IDs ending at its value, the {increment} starting at it and the one below, all in one millisecond; the layout allows an increment of at most {max}."
        )),
        Some("Lower the sequence's INCREMENT BY (and the client's allocation size) with ALTER SEQUENCE."),
    )
}

/// `snowflake_adopt_sequence()` on something that is not a sequence.
pub fn not_a_sequence(what: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
        format!("\"{what}\" is not a sequence"),
        None,
        None,
    )
}

/// An identity column's draw (`seq_identity`) from a sequence that is not
/// adopted: only the planner's and `COPY`'s swaps call it, and only for an
/// adopted one.
pub fn identity_not_adopted(what: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("sequence \"{what}\" is not adopted"),
        Some("Only an adopted identity column's draws are Snowflake IDs.".into()),
        Some("Insert into the table instead; PostgreSQL draws the identity's value."),
    )
}

/// A statement planned or run while a `COPY` into a table with adopted
/// sequences had not drawn from its swapped defaults yet
/// (`adopt::copy`): refused, the swap put back.
pub fn copy_statement_before_defaults(table: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        format!("cannot run a statement while COPY into table \"{table}\" prepares its Snowflake defaults"),
        Some("A function in COPY's WHERE clause, or in a default evaluated before the key's, ran SQL before COPY built its defaults.".into()),
        Some("Filter the rows after loading them, or COPY into a staging table and INSERT ... SELECT from it."),
    )
}

/// An adopted sequence altered to a type narrower than `bigint`.
pub fn adopted_narrowed(what: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_DATATYPE_MISMATCH,
        format!("adopted sequence \"{what}\" must stay bigint"),
        Some("Its nextval() returns Snowflake IDs, which need 64 bits.".into()),
        Some("Keep the sequence, and the columns that take its values, bigint."),
    )
}

/// `SECURITY LABEL FOR snowflake_id` on anything but a sequence.
pub fn label_not_a_sequence() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_WRONG_OBJECT_TYPE,
        "snowflake_id security labels apply to sequences only",
        None,
        Some("Label a sequence 'adopted', or use snowflake_adopt_sequences() for new ones."),
    )
}

/// A label of `snowflake_id` other than `adopted`.
pub fn label_unknown(label: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("invalid snowflake_id security label \"{label}\""),
        Some("The only label is 'adopted': the sequence is adopted.".into()),
        None,
    )
}

/// `SECURITY LABEL FOR snowflake_id` by a role that is no superuser (the
/// rights of `snowflake_adopt_sequence()`).
pub fn label_needs_superuser() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        "permission denied to adopt a sequence",
        Some("Only a superuser may set snowflake_id's security label, as only a superuser may adopt a sequence.".into()),
        Some("Restore the dump as a superuser, or have one run snowflake_adopt_sequence()."),
    )
}

/// Adoption without the library preloaded: no backend would rewrite the
/// calls, and the sequence would go on handing out its own values.
pub fn adopt_not_preloaded() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "adopting sequences requires snowflake_id in shared_preload_libraries",
        Some("Only a preloaded library sees every statement's nextval() calls.".into()),
        Some("Add snowflake_id to shared_preload_libraries and restart the server."),
    )
}

/// `currval()` of an adopted sequence before this session's `nextval()`
/// of it: PostgreSQL's own message and SQLSTATE.
pub fn currval_undefined(seq: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("currval of sequence \"{seq}\" is not yet defined in this session"),
        None,
        None,
    )
}

/// `lastval()` with no defined value: PostgreSQL's own message.
pub fn lastval_not_defined() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "lastval is not yet defined in this session",
        None,
        None,
    )
}

/// A sequence privilege missing: PostgreSQL's own message.
pub fn sequence_permission_denied(seq: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        format!("permission denied for sequence {seq}"),
        None,
        None,
    )
}

/// `setval()` on an adopted sequence changes nothing it hands out.
pub fn setval_ignored(seq: &str) {
    report(
        PgLogLevel::WARNING,
        PgSqlErrorCode::ERRCODE_WARNING,
        format!("setval() does not change what adopted sequence \"{seq}\" hands out"),
        Some("Its nextval() returns Snowflake IDs, which follow the clock and are above every earlier ID of this server.".into()),
        None,
    );
}

/// `setval()` of an adopted sequence could not move its own counter:
/// another transaction holds the sequence, or its owner may not read it.
pub fn setval_counter_stays(seq: &str) {
    report(
        PgLogLevel::WARNING,
        PgSqlErrorCode::ERRCODE_WARNING,
        format!("the counter of adopted sequence \"{seq}\" stays where it is"),
        Some("Another transaction holds the sequence, or its owner may not read it. The counter serves only values drawn outside planned statements, up to its fence.".into()),
        Some("Run setval() again when no other transaction uses the sequence."),
    );
}

/// A replicated `TRUNCATE … RESTART IDENTITY` restarted adopted sequence
/// `seq`, and neither its owner nor the replication worker's role may
/// update it to put it back at its fence.
pub fn replica_counter_restarted(seq: &str) {
    report(
        PgLogLevel::WARNING,
        PgSqlErrorCode::ERRCODE_WARNING,
        format!("the counter of adopted sequence \"{seq}\" stays restarted"),
        Some("A replicated TRUNCATE ... RESTART IDENTITY restarted it, and neither its owner nor the subscription's role may update it.".into()),
        Some("Grant UPDATE on the sequence to its owner, then run ALTER SEQUENCE ... RESTART on it: that puts its counter back at its fence."),
    );
}

/// The list of adopted sequences stayed locked (another session holds a
/// lock on it while an exclusive one is queued): for `ms` (the event
/// trigger's read), or at the one try a statement makes (`None`).
pub fn adopt_list_locked(ms: Option<u64>) -> ! {
    let how = match ms {
        Some(ms) => format!("stayed locked for {ms} ms"),
        None => "is locked, and this database's adopted sequences are not in shared memory yet (they are read once after a start)".into(),
    };
    raise(
        PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE,
        "could not read the list of adopted sequences",
        Some(format!("snowflake_id_internal.snowflake_adopted {how}: a session holds a lock on it while another waits for an exclusive one.")),
        Some("Look for both in pg_locks; the statement can be run again once either ends."),
    )
}

/// An `EXECUTE` parameter that reaches `nextval()` (or another of the
/// four sequence functions) other than by its name (an operator,
/// attribute notation), on an adopted sequence or one it cannot tell
/// (`seq`, where the argument is a constant).
pub fn adopt_execute_operator(name: &str, seq: Option<&str>) -> ! {
    let of = match seq {
        Some(s) => format!("sequence \"{s}\""),
        None => "a sequence that may be adopted".into(),
    };
    raise(
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        format!("cannot call {name}() of {of} in EXECUTE parameters other than by its name"),
        Some("EXECUTE evaluates its parameters without a plan; snowflake_id swaps the sequence functions there only where they are called by name.".into()),
        Some(&format!("Call {name}() by name, or inside the prepared statement.")),
    )
}

/// An `EXECUTE` whose parameters, analysed again after the calls that
/// had to be evaluated were, call one of the four sequence functions that
/// they did not call before (a name that now resolves elsewhere).
pub fn adopt_execute_changed(name: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        format!("EXECUTE parameters call {name}() only after other parameters were evaluated"),
        Some("Evaluating the parameters changed what a name in them resolves to (search_path, or a function made or dropped).".into()),
        Some("Evaluate the parameters in a statement of their own first."),
    )
}

/// An `EXECUTE` parameter that calls a function leaving out arguments
/// whose defaults call one of the four sequence functions.
pub fn adopt_execute_default(function: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        format!("cannot call {function}() with a default argument that calls a sequence function in EXECUTE parameters"),
        Some("EXECUTE evaluates its parameters without a plan, and PostgreSQL adds the default arguments there, where snowflake_id cannot swap their calls.".into()),
        Some("Pass the argument, or call the function inside the prepared statement."),
    )
}

/// `ALTER SEQUENCE … CYCLE` (or an identity's `SET CYCLE`) of an adopted
/// sequence.
pub fn adopted_cycle(seq: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        format!("adopted sequence \"{seq}\" cannot cycle"),
        Some("Its own counter stands at the end of its range so that nothing is drawn from it where no plan is made; cycling, it would come round to values it gave out.".into()),
        Some("Leave it NO CYCLE: nextval() of it returns Snowflake IDs, which do not cycle."),
    )
}

/// `SET UNLOGGED` of an adopted sequence or of a table that owns one; the
/// explicit adoption of an unlogged sequence.
pub fn adopted_unlogged(seq: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        format!("sequence \"{seq}\" cannot be both adopted and unlogged"),
        Some("An unlogged sequence comes back from a crash as it was first written, not where adoption put its counter, and its own values could be drawn again.".into()),
        Some("Keep the sequence (and its table) logged."),
    )
}

/// `PREPARE TRANSACTION` of a transaction that changed the list of
/// adopted sequences.
pub fn adopt_prepare() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        "cannot PREPARE a transaction that has changed the adopted sequences",
        Some("Every server process learns of an adoption when the transaction that made it commits; a prepared transaction commits elsewhere.".into()),
        Some("Commit the adoption (or the DDL that adopted a sequence) in a transaction of its own."),
    )
}

/// `snowflake_convert_adopt_sequence()` on a sequence whose column is not
/// converted.
pub fn adopt_not_converted(seq: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("sequence \"{seq}\" is not the sequence of a converted column"),
        Some("It must be a permanent bigint sequence: the identity of a bigint column, or owned by a bigint column whose default is nextval() of it.".into()),
        Some("Convert the column with snowflake_convert_column(), or have a superuser adopt the sequence with snowflake_adopt_sequence()."),
    )
}

/// The catalog read or the list's write of a conversion's adoption failed.
pub fn adopt_convert_failed(why: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "could not adopt the converted column's sequence",
        Some(why.to_string()),
        None,
    )
}

/// `pg_catalog.snowflake_id_fill()` called anywhere but in the fill of an
/// `ALTER TABLE … ADD COLUMN` that the switch rewrote (`super::fill`).
pub fn fill_outside() -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "snowflake_id_fill() fills only the rows of an ALTER TABLE ... ADD COLUMN".to_string(),
        Some("snowflake_id calls it while a bigserial or bigint identity column it adopts is added to a table.".into()),
        Some("Call snowflake_nextval() for a Snowflake ID."),
    )
}

/// A rewritten `ADD COLUMN` whose table or column something inside its
/// first step dropped or changed (`super::fill`): the statement stops.
pub fn fill_changed(table: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        format!("table \"{table}\" changed while ALTER TABLE ... ADD COLUMN filled its rows"),
        Some("Code run by the statement (a default's function, an event trigger) dropped or altered the table or the new column, or made a table from it.".into()),
        Some("Run that code in a statement of its own."),
    )
}

/// `COPY … FROM` into a table whose default (its own, or its domain's)
/// calls `setval()`, in a database with adopted sequences (`super::copy`).
pub fn copy_default_setval(table: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        format!("cannot COPY into table \"{table}\": a default it fills calls setval()"),
        Some("COPY evaluates its defaults where no plan is made; in a database with adopted sequences such a setval() could move one's counter back.".into()),
        Some("Give the column in COPY's data, or COPY into a staging table and INSERT ... SELECT from it."),
    )
}

/// A `TRUNCATE` of one of the extension's tables applied by a
/// logical-replication worker (`super::replica::adopt_skip_replicated`).
pub fn replicated_truncate(schema: &str, table: &str) -> ! {
    raise(
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        format!("cannot apply a TRUNCATE of {schema}.{table} from another server"),
        Some("It is snowflake_id's own state of this database; the publisher's rows are not applied here.".into()),
        Some("Publish without truncate (ALTER PUBLICATION ... SET (publish = 'insert, update, delete')), or skip the transaction with ALTER SUBSCRIPTION ... SKIP."),
    )
}
