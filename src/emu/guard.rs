//! Guard zones of the emulator's allocations, as pages nobody may touch.
//!
//! Each allocation is one anonymous mapping: a front zone, the data pages, a rear zone. The
//! zones are `PROT_NONE`, so any access to them, a read as much as a write, and a write of
//! any value, faults. Their NEAR bytes next to the data hold GUARD_BYTE (so a write there
//! shows which bytes it changed); the rest is address space only, never committed (reads as
//! zeros once opened). The user's bytes end where the rear zone starts (rounded up to the
//! alignment), so an index one past the end touches the zone; the data pages' bytes before
//! the user's start and after its end are slack, filled with GUARD_BYTE and compared after
//! each launch (writes there are seen, reads are not).
//!
//! A SIGSEGV whose address lies in a registered zone is recorded in that allocation's slot
//! (the first address, the count, read or write where the platform says), the zone is opened
//! (read-write) and the access goes on; after the launch `EmuApi::check_guards` reads the
//! record and the opened zone's bytes, fails the launch naming the kernel and the
//! allocation, and closes the zone again (refilled, the rest dropped, `PROT_NONE`).
//! A fault outside every zone goes to the handler that was installed before (Rust's stack
//! overflow report, or the default: the process dies as it would have).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Bytes the slack of the data pages holds: a write there changed it.
pub const GUARD_BYTE: u8 = 0xa5;

/// Bytes of each zone next to the data that hold GUARD_BYTE (the whole zone if smaller).
const NEAR: usize = 64 << 10;

/// Live allocations the fault handler can attribute at once (over every `EmuApi` of the
/// process: the tests run several at a time).
const SLOTS: usize = 4096;

/// One allocation's mapping and fault record, readable from the signal handler (atomics only).
struct Slot {
    /// Start of the mapping (0: the slot is free), the data pages, the end.
    lo: AtomicU64,
    data_lo: AtomicU64,
    data_hi: AtomicU64,
    hi: AtomicU64,
    /// Faults in the zones since the last check, the first one's address, bit 0: a fault was
    /// a write (as the platform reports it), bit 1 / 2: the front / rear zone is open.
    faults: AtomicU64,
    first: AtomicU64,
    flags: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)] // the array's initialiser only
const FREE: Slot = Slot {
    lo: AtomicU64::new(0),
    data_lo: AtomicU64::new(0),
    data_hi: AtomicU64::new(0),
    hi: AtomicU64::new(0),
    faults: AtomicU64::new(0),
    first: AtomicU64::new(0),
    flags: AtomicU64::new(0),
};
static TABLE: [Slot; SLOTS] = [FREE; SLOTS];
const WRITE: u64 = 1;
const FRONT_OPEN: u64 = 2;
const REAR_OPEN: u64 = 4;

/// The handler that was installed before ours (chained to for every other fault).
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();
static PAGE: AtomicUsize = AtomicUsize::new(0);

fn page() -> usize {
    match PAGE.load(Ordering::Relaxed) {
        0 => {
            // SAFETY: sysconf has no preconditions.
            let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            let p = if p > 0 { p as usize } else { 4096 };
            PAGE.store(p, Ordering::Relaxed);
            p
        }
        p => p,
    }
}

/// Install the SIGSEGV handler once per process (before the first allocation).
fn install() {
    PREVIOUS.get_or_init(|| {
        // SAFETY: plain sigaction calls with zeroed, then filled, structs.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_fault as *const () as usize;
            act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(libc::SIGSEGV, &act, &mut old);
            old
        }
    });
}

/// Whether the faulting access was a write: the page-fault error code's bit 1 on x86-64 Linux;
/// elsewhere unknown (reported as a read unless it changed a byte).
#[allow(unused_variables)]
fn was_write(ctx: *mut libc::c_void) -> bool {
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    {
        // SAFETY: the kernel passes a ucontext_t to an SA_SIGINFO handler.
        let uc = unsafe { &*(ctx as *const libc::ucontext_t) };
        uc.uc_mcontext.gregs[libc::REG_ERR as usize] & 2 != 0
    }
    #[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
    {
        false
    }
}

/// SIGSEGV: a fault in a zone is recorded and the zone opened; anything else is chained.
extern "C" fn on_fault(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo_t for SIGSEGV.
    let addr = unsafe { (*info).si_addr() } as u64;
    for s in &TABLE {
        let lo = s.lo.load(Ordering::Acquire);
        if lo == 0 || addr < lo || addr >= s.hi.load(Ordering::Acquire) {
            continue;
        }
        let (data_lo, data_hi) = (
            s.data_lo.load(Ordering::Acquire),
            s.data_hi.load(Ordering::Acquire),
        );
        let (zlo, zhi, open) = if addr < data_lo {
            (lo, data_lo, FRONT_OPEN)
        } else if addr >= data_hi {
            (data_hi, s.hi.load(Ordering::Acquire), REAR_OPEN)
        } else {
            break; // the data pages do not fault: not ours
        };
        if s.faults.fetch_add(1, Ordering::AcqRel) == 0 {
            s.first.store(addr, Ordering::Release);
        }
        let w = if was_write(ctx) { WRITE } else { 0 };
        s.flags.fetch_or(open | w, Ordering::AcqRel);
        // SAFETY: the zone is part of a live mapping of ours; mprotect is async-signal-safe.
        let ok = unsafe {
            libc::mprotect(
                zlo as *mut libc::c_void,
                (zhi - zlo) as usize,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        } == 0;
        if ok {
            return; // the access runs again, on the opened zone
        }
        break;
    }
    chain(sig, info, ctx);
}

/// Hand a fault that is not ours to the previous handler (or the default action).
fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let Some(old) = PREVIOUS.get() else { return };
    // SAFETY: old is what sigaction returned; a handler address is a function of the kind
    // its flags say.
    unsafe {
        if old.sa_sigaction == libc::SIG_DFL || old.sa_sigaction == libc::SIG_IGN {
            // Restore it and return: the access faults again and takes the default action.
            libc::sigaction(libc::SIGSEGV, old, std::ptr::null_mut());
        } else if old.sa_flags & libc::SA_SIGINFO != 0 {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                std::mem::transmute(old.sa_sigaction);
            f(sig, info, ctx);
        } else {
            let f: extern "C" fn(libc::c_int) = std::mem::transmute(old.sa_sigaction);
            f(sig);
        }
    }
}

/// One guarded allocation: `user` is what the host code gets, `size` bytes.
pub struct Guarded {
    slot: usize,
    base: u64,
    len: usize,
    data_lo: u64,
    data_hi: u64,
    near: u64,
    pub user: u64,
    pub size: usize,
}

/// What a launch did to an allocation's zones and slack.
pub struct Findings {
    /// Offsets (from the user's start) of the bytes it changed, in order.
    pub changed: Vec<isize>,
    /// Faults in the zones, the first one's offset, and whether one was a write.
    pub faults: u64,
    pub first: isize,
    pub write: bool,
}

fn round_up(x: usize, m: usize) -> usize {
    x.div_ceil(m) * m
}

impl Guarded {
    /// Map `size` bytes (> 0) aligned to `align` (a power of two up to the page size) between
    /// zones of `zone` bytes at least; the user's bytes hold `fresh`.
    pub fn new(size: usize, align: usize, zone: usize, fresh: u8) -> Result<Guarded, String> {
        install();
        let page = page();
        let zone = round_up(zone.max(1), page);
        let near = round_up(NEAR, page).min(zone);
        let user_len = round_up(size, align);
        let data = round_up(user_len, page);
        let len = data
            .checked_add(2 * zone)
            .ok_or_else(|| "size overflows".to_string())?;
        // SAFETY: a fresh private anonymous mapping, address space only until touched.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err("out of host address space".into());
        }
        let base = base as u64;
        let data_lo = base + zone as u64;
        let data_hi = data_lo + data as u64;
        let user = data_hi - user_len as u64;
        // The near bytes of both zones and the data pages: read-write to fill them, then the
        // zones closed. SAFETY: parts of the mapping just made.
        let filled = data_lo - near as u64;
        let ok = unsafe {
            libc::mprotect(
                filled as *mut libc::c_void,
                data + 2 * near,
                libc::PROT_READ | libc::PROT_WRITE,
            ) == 0
                && {
                    std::ptr::write_bytes(filled as *mut u8, GUARD_BYTE, data + 2 * near);
                    std::ptr::write_bytes(user as *mut u8, fresh, size);
                    libc::mprotect(filled as *mut libc::c_void, near, libc::PROT_NONE) == 0
                }
                && libc::mprotect(data_hi as *mut libc::c_void, near, libc::PROT_NONE) == 0
        };
        let slot = TABLE
            .iter()
            .position(|s| {
                s.lo.compare_exchange(0, u64::MAX, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            })
            .filter(|_| ok);
        let Some(slot) = slot else {
            // SAFETY: the mapping just made, unused.
            unsafe { libc::munmap(base as *mut libc::c_void, len) };
            return Err(if ok {
                format!("more than {SLOTS} live allocations")
            } else {
                "mprotect failed".into()
            });
        };
        let s = &TABLE[slot];
        s.faults.store(0, Ordering::Release);
        s.flags.store(0, Ordering::Release);
        s.data_lo.store(data_lo, Ordering::Release);
        s.data_hi.store(data_hi, Ordering::Release);
        s.hi.store(base + len as u64, Ordering::Release);
        s.lo.store(base, Ordering::Release);
        Ok(Guarded {
            slot,
            base,
            len,
            data_lo,
            data_hi,
            near: near as u64,
            user,
            size,
        })
    }

    /// What the last launch did out of bounds (None: nothing); the zones are closed and the
    /// slack refilled, so the next launch is not blamed for this one's accesses. No launch
    /// may run on this allocation meanwhile.
    pub fn check(&self) -> Option<Findings> {
        let s = &TABLE[self.slot];
        let flags = s.flags.load(Ordering::Acquire);
        let (lo, hi, near) = (self.base, self.base + self.len as u64, self.near);
        let slack = [
            (self.data_lo, self.user),
            (self.user + self.size as u64, self.data_hi),
        ];
        // Each zone as (flag, far part: zeros, near part: GUARD_BYTE).
        let front = (
            FRONT_OPEN,
            (lo, self.data_lo - near),
            (self.data_lo - near, self.data_lo),
        );
        let rear = (
            REAR_OPEN,
            (self.data_hi + near, hi),
            (self.data_hi, self.data_hi + near),
        );
        // In address order: the front zone, the slack, the rear zone.
        let mut changed = Vec::new();
        if flags & FRONT_OPEN != 0 {
            self.scan_far(&mut changed, front.1);
            self.scan(&mut changed, front.2, GUARD_BYTE);
        }
        for r in slack {
            self.scan(&mut changed, r, GUARD_BYTE);
        }
        if flags & REAR_OPEN != 0 {
            self.scan(&mut changed, rear.2, GUARD_BYTE);
            self.scan_far(&mut changed, rear.1);
        }
        let faults = s.faults.load(Ordering::Acquire);
        if faults == 0 && changed.is_empty() {
            return None;
        }
        let found = Findings {
            changed,
            faults,
            first: s.first.load(Ordering::Acquire) as isize - self.user as isize,
            write: flags & WRITE != 0,
        };
        for (open, (far_lo, far_hi), (near_lo, near_hi)) in [front, rear] {
            if flags & open != 0 {
                // SAFETY: a zone of this mapping, opened by the handler: its near bytes
                // refilled, its far pages dropped (zeros again), all of it closed.
                unsafe {
                    std::ptr::write_bytes(
                        near_lo as *mut u8,
                        GUARD_BYTE,
                        (near_hi - near_lo) as usize,
                    );
                    let far = (far_hi - far_lo) as usize;
                    if far > 0 {
                        libc::madvise(far_lo as *mut libc::c_void, far, libc::MADV_DONTNEED);
                    }
                    let (z_lo, z_hi) = (far_lo.min(near_lo), far_hi.max(near_hi));
                    libc::mprotect(
                        z_lo as *mut libc::c_void,
                        (z_hi - z_lo) as usize,
                        libc::PROT_NONE,
                    );
                }
            }
        }
        for (lo, hi) in slack {
            // SAFETY: the data pages' slack, outside the user's bytes.
            unsafe { std::ptr::write_bytes(lo as *mut u8, GUARD_BYTE, (hi - lo) as usize) };
        }
        s.faults.store(0, Ordering::Release);
        s.flags.store(0, Ordering::Release);
        Some(found)
    }

    /// Append the offsets (from the user's start) of the bytes of [lo, hi) that are not `want`.
    /// The range must be read-write: data pages, or a zone the handler opened.
    fn scan(&self, changed: &mut Vec<isize>, (lo, hi): (u64, u64), want: u8) {
        // SAFETY: read-write pages of this mapping (the caller's condition).
        let b = unsafe { std::slice::from_raw_parts(lo as *const u8, (hi - lo) as usize) };
        changed.extend(
            b.iter()
                .enumerate()
                .filter(|&(_, &x)| x != want)
                .map(|(i, _)| (lo + i as u64) as isize - self.user as isize),
        );
    }

    /// `scan` for zeros over an opened zone's far part, reading only its resident pages: an
    /// untouched page reads as zeros anyway, and reading it maps it (a page fault each,
    /// ~0.2 ms in this project's sandboxed machines: 1 MiB of them cost 50 ms a check).
    fn scan_far(&self, changed: &mut Vec<isize>, (lo, hi): (u64, u64)) {
        if hi <= lo {
            return;
        }
        let page = page() as u64;
        let mut resident = vec![0u8; ((hi - lo) / page) as usize];
        // SAFETY: [lo, hi) is page-aligned and part of this mapping; `resident` holds one
        // byte per page.
        let ok = unsafe {
            libc::mincore(
                lo as *mut libc::c_void,
                (hi - lo) as usize,
                resident.as_mut_ptr() as _,
            )
        } == 0;
        for (i, r) in resident.iter().enumerate() {
            if !ok || r & 1 != 0 {
                let p = lo + i as u64 * page;
                self.scan(changed, (p, p + page), 0);
            }
        }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        TABLE[self.slot].lo.store(0, Ordering::Release);
        // SAFETY: the mapping made by `new`, unmapped once.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}
