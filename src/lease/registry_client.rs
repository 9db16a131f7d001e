//! The client side of the worker-id registry: a libpq connection from the
//! lease worker (`crate::lease`) to the registry database.
//!
//! libpq is PostgreSQL's own client library, the one `postgres_fdw` and
//! `dblink` use. It is loaded when the lease worker first connects (so a
//! server with a static worker id never loads it), from the server's
//! library directory or the system's. Every call is asynchronous and waits
//! on the worker's latch and the socket, so a request never outlives its
//! timeout, and a shutdown or a postmaster death ends it at once.

use pgrx::pg_sys;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

type Conn = c_void;
type Res = c_void;

/// The libpq functions the client calls.
struct Api {
    connect_start: unsafe extern "C" fn(*const c_char) -> *mut Conn,
    connect_poll: unsafe extern "C" fn(*mut Conn) -> c_int,
    status: unsafe extern "C" fn(*const Conn) -> c_int,
    error_message: unsafe extern "C" fn(*const Conn) -> *const c_char,
    socket: unsafe extern "C" fn(*const Conn) -> c_int,
    finish: unsafe extern "C" fn(*mut Conn),
    set_nonblocking: unsafe extern "C" fn(*mut Conn, c_int) -> c_int,
    send_query_params: unsafe extern "C" fn(
        *mut Conn,
        *const c_char,
        c_int,
        *const pg_sys::Oid,
        *const *const c_char,
        *const c_int,
        *const c_int,
        c_int,
    ) -> c_int,
    flush: unsafe extern "C" fn(*mut Conn) -> c_int,
    consume_input: unsafe extern "C" fn(*mut Conn) -> c_int,
    is_busy: unsafe extern "C" fn(*mut Conn) -> c_int,
    get_result: unsafe extern "C" fn(*mut Conn) -> *mut Res,
    result_status: unsafe extern "C" fn(*const Res) -> c_int,
    result_error_message: unsafe extern "C" fn(*const Res) -> *const c_char,
    result_error_field: unsafe extern "C" fn(*const Res, c_int) -> *const c_char,
    ntuples: unsafe extern "C" fn(*const Res) -> c_int,
    nfields: unsafe extern "C" fn(*const Res) -> c_int,
    get_value: unsafe extern "C" fn(*const Res, c_int, c_int) -> *const c_char,
    get_is_null: unsafe extern "C" fn(*const Res, c_int, c_int) -> c_int,
    clear: unsafe extern "C" fn(*mut Res),
    host: unsafe extern "C" fn(*const Conn) -> *const c_char,
    port: unsafe extern "C" fn(*const Conn) -> *const c_char,
    db: unsafe extern "C" fn(*const Conn) -> *const c_char,
}

// libpq's enums, as its header numbers them.
const CONNECTION_OK: c_int = 0;
const PGRES_POLLING_FAILED: c_int = 0;
const PGRES_POLLING_READING: c_int = 1;
const PGRES_POLLING_WRITING: c_int = 2;
const PGRES_POLLING_OK: c_int = 3;
const PGRES_TUPLES_OK: c_int = 2;
const PG_DIAG_SQLSTATE: c_int = b'C' as c_int;
const RTLD_NOW: c_int = 2;

unsafe extern "C" {
    fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    fn dlerror() -> *const c_char;
}

static API: OnceLock<Result<Api, String>> = OnceLock::new();

/// Load libpq: first from the server's library directory (a relocatable
/// build ships its own), then wherever the system keeps it.
fn api() -> Result<&'static Api, String> {
    API.get_or_init(load).as_ref().map_err(|e| e.clone())
}

fn load() -> Result<Api, String> {
    // SAFETY: pkglib_path is a NUL-terminated path the server set at
    // start-up; dlopen and dlsym are called with valid C strings, and each
    // symbol is given the type libpq-fe.h declares for it.
    unsafe {
        let pkglib =
            CStr::from_ptr((&raw const pg_sys::pkglib_path).cast::<c_char>()).to_string_lossy();
        let mut tried = vec![];
        let mut handle = std::ptr::null_mut();
        for candidate in [format!("{pkglib}/libpq.so.5"), "libpq.so.5".to_string()] {
            let c = CString::new(candidate.clone()).map_err(|e| e.to_string())?;
            handle = dlopen(c.as_ptr(), RTLD_NOW);
            if !handle.is_null() {
                break;
            }
            let err = dlerror();
            tried.push(if err.is_null() {
                candidate
            } else {
                CStr::from_ptr(err).to_string_lossy().into_owned()
            });
        }
        if handle.is_null() {
            return Err(format!("could not load libpq: {}", tried.join("; ")));
        }
        macro_rules! sym {
            ($name:literal) => {
                symbol(handle, $name)?
            };
        }
        Ok(Api {
            connect_start: sym!(c"PQconnectStart"),
            connect_poll: sym!(c"PQconnectPoll"),
            status: sym!(c"PQstatus"),
            error_message: sym!(c"PQerrorMessage"),
            socket: sym!(c"PQsocket"),
            finish: sym!(c"PQfinish"),
            set_nonblocking: sym!(c"PQsetnonblocking"),
            send_query_params: sym!(c"PQsendQueryParams"),
            flush: sym!(c"PQflush"),
            consume_input: sym!(c"PQconsumeInput"),
            is_busy: sym!(c"PQisBusy"),
            get_result: sym!(c"PQgetResult"),
            result_status: sym!(c"PQresultStatus"),
            result_error_message: sym!(c"PQresultErrorMessage"),
            result_error_field: sym!(c"PQresultErrorField"),
            ntuples: sym!(c"PQntuples"),
            nfields: sym!(c"PQnfields"),
            get_value: sym!(c"PQgetvalue"),
            get_is_null: sym!(c"PQgetisnull"),
            clear: sym!(c"PQclear"),
            host: sym!(c"PQhost"),
            port: sym!(c"PQport"),
            db: sym!(c"PQdb"),
        })
    }
}

/// The function `name` of the library `handle`, as the type the caller
/// gives it (a function pointer of libpq-fe.h's signature).
///
/// # Safety
/// `T` must be the function's type.
unsafe fn symbol<T: Copy>(handle: *mut c_void, name: &CStr) -> Result<T, String> {
    assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: a valid handle and C string; the caller vouches for T.
    unsafe {
        let p = dlsym(handle, name.as_ptr());
        if p.is_null() {
            return Err(format!("libpq has no function {}", name.to_string_lossy()));
        }
        Ok(std::mem::transmute_copy::<*mut c_void, T>(&p))
    }
}

/// Why a request did not get an answer.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The server's SQLSTATE, when the registry answered with an error.
    pub sqlstate: Option<String>,
    /// What went wrong, first: it leads every message shown of it.
    pub message: String,
    /// Which registry, briefly (`"dbname" on host:port`, never the
    /// password), shown last: a long socket path costs nothing else.
    pub registry: String,
}

impl Failure {
    pub fn local(message: impl Into<String>) -> Self {
        Failure {
            sqlstate: None,
            message: message.into(),
            registry: String::new(),
        }
    }

    /// The same failure, naming the registry it came from.
    pub fn at(mut self, registry: &str) -> Self {
        self.registry = registry.to_string();
        self
    }
}

/// The reason, its SQLSTATE, then the registry: `snowflake_stats()`'s
/// `registry_last_error` and the log show it so (issue 45).
impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)?;
        if let Some(s) = &self.sqlstate {
            write!(f, " (SQLSTATE {s})")?;
        }
        if !self.registry.is_empty() {
            write!(f, "; registry {}", self.registry)?;
        }
        Ok(())
    }
}

/// Whether the caller must stop waiting: a SIGTERM arrived.
pub type Stop<'a> = &'a dyn Fn() -> bool;

/// One connection to the registry.
pub struct Connection {
    conn: *mut Conn,
    api: &'static Api,
    /// `"dbname" on host:port`, for messages (never the password).
    pub name: String,
}

impl Drop for Connection {
    fn drop(&mut self) {
        // SAFETY: conn came from PQconnectStart and is finished once.
        unsafe { (self.api.finish)(self.conn) };
    }
}

fn text(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: libpq returns NUL-terminated strings it owns.
        unsafe { CStr::from_ptr(p) }
            .to_string_lossy()
            .trim_end()
            .to_string()
    }
}

/// Wait for the socket (`readable` or writable) or the latch until
/// `deadline`. Returns false when the deadline passed or `stop()` said so.
fn wait_socket(sock: c_int, readable: bool, deadline: Instant, stop: Stop) -> bool {
    loop {
        if stop() {
            return false;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let what = if readable {
            pg_sys::WL_SOCKET_READABLE
        } else {
            pg_sys::WL_SOCKET_WRITEABLE
        };
        // SAFETY: waiting on this process's latch and a socket libpq owns;
        // WL_EXIT_ON_PM_DEATH ends the process if the postmaster died.
        let rc = unsafe {
            let rc = pg_sys::WaitLatchOrSocket(
                pg_sys::MyLatch,
                (pg_sys::WL_LATCH_SET | what | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH)
                    as c_int,
                sock as pg_sys::pgsocket,
                left.as_millis().max(1) as _,
                pg_sys::PG_WAIT_EXTENSION,
            );
            if rc & pg_sys::WL_LATCH_SET as c_int != 0 {
                pg_sys::ResetLatch(pg_sys::MyLatch);
            }
            rc
        };
        if rc & what as c_int != 0 {
            return true;
        }
    }
}

impl Connection {
    /// Connect to `conninfo` within `timeout`.
    pub fn open(conninfo: &str, timeout: Duration, stop: Stop) -> Result<Connection, Failure> {
        let api = api().map_err(Failure::local)?;
        let c = CString::new(conninfo)
            .map_err(|_| Failure::local("snowflake_id.registry contains a NUL byte"))?;
        let deadline = Instant::now() + timeout;
        // SAFETY: a valid C string; a NULL result means out of memory.
        let conn = unsafe { (api.connect_start)(c.as_ptr()) };
        if conn.is_null() {
            return Err(Failure::local("out of memory connecting to the registry"));
        }
        let mut me = Connection {
            conn,
            api,
            name: String::new(),
        };
        me.name = me.describe();
        // SAFETY: polling the connection libpq is making, as its manual's
        // "Connecting asynchronously" section prescribes.
        unsafe {
            if (api.status)(conn) == 1 {
                return Err(me.failure("could not connect to the registry"));
            }
            let mut poll = PGRES_POLLING_WRITING;
            loop {
                match poll {
                    PGRES_POLLING_OK => break,
                    PGRES_POLLING_FAILED => {
                        return Err(me.failure("could not connect to the registry"))
                    }
                    _ => {
                        let readable = poll == PGRES_POLLING_READING;
                        if !wait_socket((api.socket)(conn), readable, deadline, stop) {
                            return Err(Failure::local(format!(
                                "could not connect to the registry within {} ms",
                                timeout.as_millis()
                            ))
                            .at(&me.name));
                        }
                        poll = (api.connect_poll)(conn);
                    }
                }
            }
            if (api.status)(conn) != CONNECTION_OK {
                return Err(me.failure("could not connect to the registry"));
            }
            (api.set_nonblocking)(conn, 1);
        }
        me.name = me.describe();
        Ok(me)
    }

    fn describe(&self) -> String {
        // SAFETY: accessors of a live connection object.
        let (h, p, d) = unsafe {
            (
                text((self.api.host)(self.conn)),
                text((self.api.port)(self.conn)),
                text((self.api.db)(self.conn)),
            )
        };
        format!("\"{d}\" on {h}:{p}")
    }

    fn failure(&self, what: &str) -> Failure {
        // SAFETY: accessor of a live connection object.
        let msg = text(unsafe { (self.api.error_message)(self.conn) });
        Failure::local(format!("{what}: {}", squash(&msg))).at(&self.name)
    }

    /// Whether the connection is still usable.
    pub fn ok(&self) -> bool {
        // SAFETY: accessor of a live connection object.
        unsafe { (self.api.status)(self.conn) == CONNECTION_OK }
    }

    /// Run `sql` with text parameters (NULL for `None`) and return the
    /// rows as text, within `timeout`. A timed-out request leaves the
    /// connection unusable ([`Self::ok`] is then false or a later request
    /// fails): the caller drops it.
    pub fn query(
        &mut self,
        sql: &str,
        params: &[Option<String>],
        timeout: Duration,
        stop: Stop,
    ) -> Result<Vec<Vec<Option<String>>>, Failure> {
        let api = self.api;
        let deadline = Instant::now() + timeout;
        let sql_c = CString::new(sql).map_err(|_| Failure::local("NUL in a query"))?;
        let values: Vec<Option<CString>> = params
            .iter()
            .map(|p| {
                p.as_ref()
                    .map(|s| CString::new(s.as_str()).unwrap_or_default())
            })
            .collect();
        let ptrs: Vec<*const c_char> = values
            .iter()
            .map(|v| v.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()))
            .collect();
        let timed_out = || {
            Failure::local(format!(
                "the registry did not answer within {} ms",
                timeout.as_millis()
            ))
            .at(&self.name)
        };
        // SAFETY: the asynchronous query protocol of libpq-fe.h on a live,
        // non-blocking connection; every result is cleared.
        unsafe {
            if (api.send_query_params)(
                self.conn,
                sql_c.as_ptr(),
                ptrs.len() as c_int,
                std::ptr::null(),
                ptrs.as_ptr(),
                std::ptr::null(),
                std::ptr::null(),
                0,
            ) == 0
            {
                return Err(self.failure("could not send a request to the registry"));
            }
            let sock = (api.socket)(self.conn);
            loop {
                match (api.flush)(self.conn) {
                    0 => break,
                    1 => {
                        if !wait_socket(sock, false, deadline, stop) {
                            return Err(timed_out());
                        }
                    }
                    _ => return Err(self.failure("could not send a request to the registry")),
                }
            }
            let mut rows = None;
            let mut error = None;
            loop {
                while (api.is_busy)(self.conn) != 0 {
                    if !wait_socket(sock, true, deadline, stop) {
                        return Err(timed_out());
                    }
                    if (api.consume_input)(self.conn) == 0 {
                        return Err(self.failure("lost the connection to the registry"));
                    }
                }
                let res = (api.get_result)(self.conn);
                if res.is_null() {
                    break;
                }
                if (api.result_status)(res) == PGRES_TUPLES_OK {
                    let (n, f) = ((api.ntuples)(res), (api.nfields)(res));
                    rows = Some(
                        (0..n)
                            .map(|r| {
                                (0..f)
                                    .map(|c| {
                                        ((api.get_is_null)(res, r, c) == 0)
                                            .then(|| text((api.get_value)(res, r, c)))
                                    })
                                    .collect()
                            })
                            .collect(),
                    );
                } else if error.is_none() {
                    let state = text((api.result_error_field)(res, PG_DIAG_SQLSTATE));
                    error = Some(Failure {
                        sqlstate: (!state.is_empty()).then_some(state),
                        message: squash(&text((api.result_error_message)(res))),
                        registry: self.name.clone(),
                    });
                }
                (api.clear)(res);
            }
            match (error, rows) {
                (Some(e), _) => Err(e),
                (None, Some(rows)) => Ok(rows),
                (None, None) => Err(Failure::local("the registry returned no rows").at(&self.name)),
            }
        }
    }
}

/// A libpq message on one line: its newlines and tabs become spaces.
fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
