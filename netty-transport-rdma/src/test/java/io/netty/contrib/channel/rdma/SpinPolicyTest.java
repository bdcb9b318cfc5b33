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
            p.spun(3_000, false);
        }
        // About HEADROOM times 3 µs: the spin after the last message of a burst costs 25 µs, not 50.
        assertThat(p.window()).isBetween(24_000L, 26_000L);
        for (int i = 0; i < 100; i++) {
            p.spun(40_000, false);
        }
        assertThat(p.window()).isEqualTo(MAX);
    }

    @Test
    void aBlockThatAFullSpinWouldHaveSavedWidensTheWindow() {
        SpinPolicy p = new SpinPolicy(MAX);
        for (int i = 0; i < 100; i++) {
            p.spun(1_000, false);
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
        p.lostCore();
        assertThat(p.window()).as("a spin that lost its core, once, is a miss").isEqualTo(MAX / 2);
        p.spun(1_000, false);
        assertThat(p.window()).as("a spin that pays ends the run of misses").isGreaterThan(MAX / 2);
    }

    @Test
    void spinsThatOftenLoseTheirCoreKeepTheWindowShortest() {
        SpinPolicy p = new SpinPolicy(MAX);
        for (int i = 0; i < 100; i++) {
            p.spun(3_000, false);
        }
        int paidBetween = 2;
        for (int lost = 1; lost < SpinPolicy.OVERSUBSCRIBED_LOSSES; lost++) {
            p.lostCore();
            for (int i = 0; i < paidBetween; i++) {
                p.spun(3_000, false);
            }
            assertThat(p.window()).as(lost + " lost cores: a collection, a compiler").isBetween(20_000L, 30_000L);
        }
        p.spun(10_000, true);
        assertThat(p.window()).as(SpinPolicy.OVERSUBSCRIBED_LOSSES + " of the last 32 spins lost their core")
                .isEqualTo(SpinPolicy.MIN_SPIN_NANOS);
        // The first loss is this many spins back: it leaves the last 32 after the rest.
        int firstLossAgo = (SpinPolicy.OVERSUBSCRIBED_LOSSES - 1) * (paidBetween + 1);
        for (int i = 0; i < 32 - firstLossAgo - 1; i++) {
            p.spun(3_000, false);
            assertThat(p.window()).as("spins that pay do not widen it yet").isEqualTo(SpinPolicy.MIN_SPIN_NANOS);
        }
        p.spun(3_000, false);
        assertThat(p.window()).as("one loss fewer than the limit in the last 32").isBetween(20_000L, 30_000L);
    }

    @Test
    void lostCoresFurtherApartStayMisses() {
        SpinPolicy p = new SpinPolicy(MAX);
        for (int round = 0; round < 10; round++) {
            p.lostCore();
            for (int i = 0; i < 10; i++) {
                p.spun(3_000, false);
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
        p.spun(5_000, false);
        p.blocked(5_000);
        p.lostCore();
        assertThat(p.window()).isZero();
    }
}
