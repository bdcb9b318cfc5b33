package io.netty.contrib.channel.rdma;

/**
 * How long an adaptive {@link RdmaIoHandler} loop spins before it blocks, learnt from how its spins went. Loop
 * thread only.
 *
 * <ul>
 *   <li>A spin that finds work after {@code t} ns <em>paid</em>: the window becomes {@value #HEADROOM} times the
 *       running average of {@code t} (plus {@value #MIN_SPIN_NANOS} ns), at most {@code spinNanos}. An echo whose
 *       answer comes in 3 µs spins about 25 µs, not 50, after its last message of a burst.</li>
 *   <li>A block whose completions came sooner than a full spin would have waited counts as a spin that paid
 *       late.</li>
 *   <li>A spin <em>missed</em> when the loop blocked and its next work came later than a full spin, or when the
 *       spinning thread lost its core meanwhile (a turn of the spin took over {@value #PREEMPTED_NANOS} ns): then
 *       the machine has more busy threads than cores, and spinning takes the core the peer or the JIT compiler
 *       needs. {@value #SHRINK_AFTER_MISSES} misses in a row halve the window, down to {@value #MIN_SPIN_NANOS}
 *       ns; fewer (a preempted peer, a collection) say nothing about the traffic.</li>
 *   <li>At the shortest window the full spin is tried again after {@value #RETRY_AFTER_MISSES} more misses: two
 *       peers that both block see each other's wake-up latency and would never spin again, though spinning could
 *       pay once both do.</li>
 *   <li>When {@value #OVERSUBSCRIBED_LOSSES} or more of the last 32 spins lost their core, or
 *       {@value #OVERSUBSCRIBED_SLICES} or more lost it for a whole time slice of another thread (a turn of
 *       {@value #SLICE_NANOS} ns or more: a CPU-bound thread beside the loop), the machine is <em>oversubscribed</em>,
 *       not passed by a collection or a compiler: the window is the shortest, however soon spins pay, until fewer of
 *       the last 32 did. (gRPC's executor threads and three loops on two cores lost the
 *       core in four spins of ten; every spin there delays a thread that has work. Beside two CPU-bound processes
 *       nearly every spin does.) Four of 32 for any loss was too few: gRPC's executors, which run briefly between
 *       calls, kept the loops at the shortest window, so a loop blocked before the executor's answer came and had to
 *       be woken for it; eight made small gRPC calls 10-20 % faster in one JVM and in two. Eight alone was too many
 *       beside CPU-bound threads: a loop then spun through up to eight of their slices before it stopped spinning,
 *       and 64 B echoes there sometimes took a slice each, 4 ms. Losses that long keep the limit at four.</li>
 * </ul>
 */
final class SpinPolicy {
    /** The shortest window: a few polls. */
    static final long MIN_SPIN_NANOS = 1_000;
    /** A turn of the spin this long means the thread was preempted. */
    static final long PREEMPTED_NANOS = 20_000;
    static final int HEADROOM = 8;
    static final int SHRINK_AFTER_MISSES = 4;
    static final int RETRY_AFTER_MISSES = 32;
    /** Spins, of the last 32, that lost their core when the machine is taken as oversubscribed. */
    static final int OVERSUBSCRIBED_LOSSES = 8;
    /** A turn of the spin this long: the thread waited out another thread's time slice. */
    static final long SLICE_NANOS = 1_000_000;
    /** Spins, of the last 32, that waited out a time slice when the machine is taken as oversubscribed. */
    static final int OVERSUBSCRIBED_SLICES = 4;

    private final long max;
    private final long min;
    private long window;
    /** Running average (1/8 weight) of how long spins that paid took. */
    private long paidAfter;
    private int misses;
    private int missesAtMin;
    /** Whether each of the last 32 spins lost its core, the latest in bit 0. */
    private int lostCores;
    /** Whether each of the last 32 spins waited out a time slice ({@link #SLICE_NANOS}), the latest in bit 0. */
    private int lostSlices;

    SpinPolicy(long spinNanos) {
        max = spinNanos;
        min = Math.min(spinNanos, MIN_SPIN_NANOS);
        window = max;
        paidAfter = max / HEADROOM;
    }

    /** How long to spin now. */
    long window() {
        return window;
    }

    /**
     * The spin found work {@code nanos} after it began; its longest turn took {@code longestTurn} ns (over
     * {@link #PREEMPTED_NANOS}: the thread lost its core meanwhile).
     */
    void spun(long nanos, long longestTurn) {
        if (longestTurn > PREEMPTED_NANOS) {
            lostCore(longestTurn);
        } else {
            lostCores <<= 1;
            lostSlices <<= 1;
            paid(nanos);
        }
    }

    /**
     * A spin lost its core (before a block, or before it found work) for {@code longestTurn} ns at most: a miss,
     * and a sign of oversubscription.
     */
    void lostCore(long longestTurn) {
        lostCores = lostCores << 1 | 1;
        lostSlices = lostSlices << 1 | (longestTurn >= SLICE_NANOS ? 1 : 0);
        if (oversubscribed()) {
            window = min;
            misses = 0;
            missesAtMin = 0;
        } else {
            missed();
        }
    }

    private boolean oversubscribed() {
        return Integer.bitCount(lostCores) >= OVERSUBSCRIBED_LOSSES
                || Integer.bitCount(lostSlices) >= OVERSUBSCRIBED_SLICES;
    }

    /**
     * The loop blocked after a spin of {@link #window()} and woke {@code waitedNanos} later, with completions or
     * after longer than a full spin (a short block that a task or timer ended says nothing).
     */
    void blocked(long waitedNanos) {
        lostCores <<= 1;
        lostSlices <<= 1;
        long after = window + waitedNanos;
        if (after <= max) {
            paid(after);
        } else {
            missed();
        }
    }

    private void paid(long nanos) {
        paidAfter += (nanos - paidAfter) / 8;
        window = oversubscribed() ? min : Math.max(min, Math.min(max, HEADROOM * paidAfter + MIN_SPIN_NANOS));
        misses = 0;
        missesAtMin = 0;
    }

    private void missed() {
        if (++misses < SHRINK_AFTER_MISSES) {
            return;
        }
        if (window > min) {
            window = Math.max(min, window / 2);
        } else if (++missesAtMin >= RETRY_AFTER_MISSES) {
            window = max;
            misses = 0;
            missesAtMin = 0;
        }
    }
}
