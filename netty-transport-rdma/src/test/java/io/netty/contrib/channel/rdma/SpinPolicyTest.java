package io.netty.contrib.channel.rdma;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/** The adaptive loop's spin window, decision by decision. */
class SpinPolicyTest {
    private static final long MAX = 50_000;

    @Test
    void startsWithTheFullSpinAndFollowsHowSoonSpinsPay() {
        SpinPolicy p = new SpinPolicy(MAX);
        assertThat(p.window()).isEqualTo(MAX);
        for (int i = 0; i < 100; i++) {
            p.spun(3_000, 0);
        }
        // About HEADROOM times 3 µs: the spin after the last message of a burst costs 25 µs, not 50.
        assertThat(p.window()).isBetween(24_000L, 26_000L);
        for (int i = 0; i < 100; i++) {
            p.spun(40_000, 0);
        }
        assertThat(p.window()).isEqualTo(MAX);
    }

    @Test
    void aBlockThatAFullSpinWouldHaveSavedWidensTheWindow() {
        SpinPolicy p = new SpinPolicy(MAX);
        for (int i = 0; i < 100; i++) {
            p.spun(1_000, 0);
        }
        long narrow = p.window();
        for (int i = 0; i < 10; i++) {
            p.blocked(20_000);
        }
        assertThat(p.window()).isGreaterThan(narrow);
    }

    @Test
    void missesInARowHalveTheWindowButFewerDoNot() {
        SpinPolicy p = new SpinPolicy(MAX);
        for (int i = 0; i < SpinPolicy.SHRINK_AFTER_MISSES - 1; i++) {
            p.blocked(1_000_000);
        }
        assertThat(p.window()).as("a preempted peer or a collection").isEqualTo(MAX);
        p.lostCore(30_000);
        assertThat(p.window()).as("a spin that lost its core, once, is a miss").isEqualTo(MAX / 2);
        p.spun(1_000, 0);
        assertThat(p.window()).as("a spin that pays ends the run of misses").isGreaterThan(MAX / 2);
    }

    @Test
    void spinsThatOftenLoseTheirCoreKeepTheWindowShortest() {
        SpinPolicy p = new SpinPolicy(MAX);
        for (int i = 0; i < 100; i++) {
            p.spun(3_000, 0);
        }
        int paidBetween = 2;
        for (int lost = 1; lost < SpinPolicy.OVERSUBSCRIBED_LOSSES; lost++) {
            p.lostCore(30_000);
            for (int i = 0; i < paidBetween; i++) {
                p.spun(3_000, 0);
            }
            assertThat(p.window()).as(lost + " lost cores: a collection, a compiler").isBetween(20_000L, 30_000L);
        }
        p.spun(10_000, 30_000);
        assertThat(p.window()).as(SpinPolicy.OVERSUBSCRIBED_LOSSES + " of the last 32 spins lost their core")
                .isEqualTo(SpinPolicy.MIN_SPIN_NANOS);
        // The first loss is this many spins back: it leaves the last 32 after the rest.
        int firstLossAgo = (SpinPolicy.OVERSUBSCRIBED_LOSSES - 1) * (paidBetween + 1);
        for (int i = 0; i < 32 - firstLossAgo - 1; i++) {
            p.spun(3_000, 0);
            assertThat(p.window()).as("spins that pay do not widen it yet").isEqualTo(SpinPolicy.MIN_SPIN_NANOS);
        }
        p.spun(3_000, 0);
        assertThat(p.window()).as("one loss fewer than the limit in the last 32").isBetween(20_000L, 30_000L);
    }

    /** Beside a CPU-bound thread a spin that loses its core waits out that thread's time slice: fewer say so. */
    @Test
    void spinsThatWaitOutTimeSlicesKeepTheWindowShortestSooner() {
        SpinPolicy p = new SpinPolicy(MAX);
        for (int i = 0; i < 100; i++) {
            p.spun(3_000, 0);
        }
        for (int lost = 1; lost < SpinPolicy.OVERSUBSCRIBED_SLICES; lost++) {
            p.lostCore(4_000_000);
            p.spun(3_000, 0);
            p.spun(3_000, 0);
            assertThat(p.window()).as(lost + " time slices waited out").isBetween(20_000L, 30_000L);
        }
        p.spun(10_000, SpinPolicy.SLICE_NANOS);
        assertThat(p.window()).as(SpinPolicy.OVERSUBSCRIBED_SLICES + " of the last 32 spins waited out a slice")
                .isEqualTo(SpinPolicy.MIN_SPIN_NANOS);
    }

    @Test
    void lostCoresFurtherApartStayMisses() {
        SpinPolicy p = new SpinPolicy(MAX);
        for (int round = 0; round < 10; round++) {
            p.lostCore(30_000);
            for (int i = 0; i < 10; i++) {
                p.spun(3_000, 0);
            }
        }
        assertThat(p.window()).isBetween(20_000L, 30_000L);
    }

    @Test
    void atTheShortestWindowTheFullSpinIsTriedAgain() {
        SpinPolicy p = new SpinPolicy(MAX);
        int misses = 0;
        while (p.window() > SpinPolicy.MIN_SPIN_NANOS) {
            p.blocked(1_000_000);
            misses++;
        }
        assertThat(misses).isLessThan(20);
        for (int i = 0; i < SpinPolicy.RETRY_AFTER_MISSES - 1; i++) {
            p.blocked(1_000_000);
        }
        assertThat(p.window()).isEqualTo(SpinPolicy.MIN_SPIN_NANOS);
        p.blocked(1_000_000);
        assertThat(p.window()).isEqualTo(MAX);
    }

    @Test
    void zeroSpinStaysZero() {
        SpinPolicy p = new SpinPolicy(0);
        p.spun(5_000, 0);
        p.blocked(5_000);
        p.lostCore(30_000);
        assertThat(p.window()).isZero();
    }
}
