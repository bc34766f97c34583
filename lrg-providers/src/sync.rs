//! Locks that survive a panic elsewhere: the one place lrg recovers a
//! poisoned lock.
//!
//! Every lock in lrg guards state that each critical section leaves
//! consistent (whole values replaced, counters bumped, items pushed), so a
//! panic while one was held does not leave half-written data behind; going
//! on with the value is better than turning one panic into many.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Lock `mutex`, recovering it if a panic poisoned it.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// Read-lock `lock`, recovering it if a panic poisoned it.
pub fn read<T: ?Sized>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|p| p.into_inner())
}

/// Write-lock `lock`, recovering it if a panic poisoned it.
pub fn write<T: ?Sized>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poisoned_lock_still_gives_its_value() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let r = std::sync::Arc::new(RwLock::new(2));
        let (m2, r2) = (m.clone(), r.clone());
        let _ = std::thread::spawn(move || {
            let _g = m2.lock();
            let _w = r2.write();
            panic!("poison both");
        })
        .join();
        assert!(m.is_poisoned() && r.is_poisoned());
        *lock(&m) += 1;
        *write(&r) += 1;
        assert_eq!((*lock(&m), *read(&r)), (2, 3));
    }
}
