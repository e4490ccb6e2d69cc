//! Undo steps recorded while creating something, run in reverse if creation fails.

pub(in crate::service) struct Rollback {
    steps: Vec<(&'static str, Box<dyn FnOnce() + Send>)>,
}

impl Rollback {
    pub fn new() -> Self {
        Rollback { steps: Vec::new() }
    }

    pub fn push(&mut self, label: &'static str, undo: impl FnOnce() + Send + 'static) {
        self.steps.push((label, Box::new(undo)));
    }

    /// Creation succeeded: keep everything.
    pub fn commit(mut self) {
        self.steps.clear();
    }
}

impl Drop for Rollback {
    /// Undo steps remove directories, unmount and kill: blocking work, off the async workers.
    fn drop(&mut self) {
        if self.steps.is_empty() {
            return;
        }
        crate::blocking::run(|| {
            while let Some((label, undo)) = self.steps.pop() {
                tracing::debug!(step = label, "rolling back");
                undo();
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn runs_in_reverse_unless_committed() {
        let log = Arc::new(Mutex::new(Vec::new()));
        {
            let mut rollback = Rollback::new();
            for n in 1..=3 {
                let log = log.clone();
                rollback.push("step", move || log.lock().unwrap().push(n));
            }
        }
        assert_eq!(*log.lock().unwrap(), vec![3, 2, 1]);
        let mut kept = Rollback::new();
        let log2 = log.clone();
        kept.push("step", move || log2.lock().unwrap().push(9));
        kept.commit();
        assert_eq!(log.lock().unwrap().len(), 3);
    }
}
