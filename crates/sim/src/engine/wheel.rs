//! The event queue's store of pending keys: a small binary heap for the current bucket of time
//! and a wheel of unsorted buckets for the rest (a calendar queue).
//!
//! Why: with every pending timer in one heap (≈ 150 on `phone`, ≈ 1,350 on `server64`: mostly
//! sleeping tasks' wake-ups) each pop and push walked 7–10 levels, ≈ 10 % of a run's
//! instructions. Here a push into a later bucket is an append, and the heap only ever holds the
//! keys of one bucket (≈ 1 ms), a handful on `phone`.
//!
//! The order is exactly the keys' order, whatever the bucket width: the heap holds every key of
//! bucket ≤ `cur`, the wheel every key of a bucket in (`cur`, `cur` + [`WHEEL`]), and `overflow`
//! the rest, so every key outside the heap is later than every key in it.

/// Width of a bucket: 2^20 ns ≈ 1 ms.
const BUCKET_SHIFT: u32 = 20;
/// Buckets in the wheel (≈ 268 ms ahead); later keys wait in `overflow`, which is re-sorted
/// into the wheel each time `cur` reaches a multiple of this.
const WHEEL: u64 = 256;

fn bucket(k: u128) -> u64 {
    ((k >> 64) as u64) >> BUCKET_SHIFT
}

pub struct Wheel {
    /// Binary min-heap of the keys with bucket ≤ `cur`.
    heap: Vec<u128>,
    cur: u64,
    /// Keys with bucket b in (`cur`, `cur` + WHEEL), at index b % WHEEL, unsorted.
    wheel: Vec<Vec<u128>>,
    in_wheel: usize,
    /// Keys with bucket ≥ `cur` + WHEEL, unsorted.
    overflow: Vec<u128>,
}

impl Default for Wheel {
    fn default() -> Self {
        Wheel {
            heap: Vec::new(),
            cur: 0,
            wheel: vec![Vec::new(); WHEEL as usize],
            in_wheel: 0,
            overflow: Vec::new(),
        }
    }
}

impl Wheel {
    pub fn push(&mut self, k: u128) {
        let b = bucket(k);
        if b <= self.cur {
            self.heap.push(k);
            self.sift_up(self.heap.len() - 1);
        } else if b < self.cur + WHEEL {
            self.wheel[(b % WHEEL) as usize].push(k);
            self.in_wheel += 1;
        } else {
            self.overflow.push(k);
        }
    }

    /// The smallest key, moving to the next non-empty bucket when the heap is empty.
    pub fn first(&mut self) -> Option<u128> {
        if self.heap.is_empty() {
            self.advance();
        }
        self.heap.first().copied()
    }

    /// Remove the smallest key; [`Wheel::first`] returned it.
    pub fn pop_first(&mut self) -> u128 {
        let last = self.heap.pop().expect("pop_first after first");
        let n = self.heap.len();
        if n == 0 {
            return last;
        }
        // The hole left at the root goes down to a leaf along the smaller children, one compare
        // per level, and the last key is put there and sifted up (it rarely moves): fewer
        // compares than testing it at every level.
        let h = &mut self.heap[..];
        let top = h[0];
        let (mut i, mut c) = (0, 1);
        while c + 1 < n {
            c += (h[c + 1] < h[c]) as usize;
            h[i] = h[c];
            i = c;
            c = 2 * i + 1;
        }
        if c < n {
            h[i] = h[c];
            i = c;
        }
        h[i] = last;
        self.sift_up(i);
        top
    }

    /// Every pending key, leaving the store empty (at the same bucket).
    pub fn take_all(&mut self) -> Vec<u128> {
        let mut all = std::mem::take(&mut self.heap);
        for b in &mut self.wheel {
            all.append(b);
        }
        all.append(&mut self.overflow);
        self.in_wheel = 0;
        all
    }

    fn sift_up(&mut self, mut i: usize) {
        let h = &mut self.heap[..=i];
        let k = h[i];
        while i > 0 {
            let parent = (i - 1) / 2;
            if h[parent] <= k {
                break;
            }
            h[i] = h[parent];
            i = parent;
        }
        h[i] = k;
    }

    /// Move to the next bucket that holds keys (jumping straight to the earliest overflow key's
    /// bucket when the wheel is empty) until the heap has some; stop when nothing is pending.
    fn advance(&mut self) {
        while self.heap.is_empty() {
            if self.in_wheel == 0 {
                let Some(b) = self.overflow.iter().map(|&k| bucket(k)).min() else {
                    return;
                };
                self.cur = b;
                self.spill();
                continue;
            }
            self.cur += 1;
            if self.cur % WHEEL == 0 {
                self.spill();
            }
            let slot = (self.cur % WHEEL) as usize;
            let mut keys = std::mem::take(&mut self.wheel[slot]);
            self.in_wheel -= keys.len();
            for k in keys.drain(..) {
                self.heap.push(k);
                self.sift_up(self.heap.len() - 1);
            }
            self.wheel[slot] = keys; // keep its capacity
        }
    }

    /// Re-place the overflow keys that are now within the wheel's reach.
    fn spill(&mut self) {
        let mut i = 0;
        while i < self.overflow.len() {
            if bucket(self.overflow[i]) < self.cur + WHEEL {
                let k = self.overflow.swap_remove(i);
                self.push(k);
            } else {
                i += 1;
            }
        }
    }
}
