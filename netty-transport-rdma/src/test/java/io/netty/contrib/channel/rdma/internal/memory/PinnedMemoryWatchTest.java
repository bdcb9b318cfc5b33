package io.netty.contrib.channel.rdma.internal.memory;

import io.netty.contrib.channel.rdma.internal.verbs.ResourceLimits;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/** The warning near RLIMIT_MEMLOCK: once per crossing of the threshold, at most once per interval. */
class PinnedMemoryWatchTest {
    private static final long MIB = 1 << 20;
    private static final long SECOND = 1_000_000_000L;
    private static final String STATUS = "VmPin:\t0 kB\nCapEff:\t000001fffeffbfff\n";

    private static PinnedMemory.Snapshot pinned(long bytes, long limit) {
        return PinnedMemory.snapshot(bytes, STATUS, limit);
    }

    @Test
    void warnsOncePerCrossingAndNotMoreOftenThanTheInterval() {
        PinnedMemoryWatch watch = new PinnedMemoryWatch(80, 60 * SECOND);
        assertThat(watch.check(pinned(70 * MIB, 100 * MIB), 0)).isNull();
        String warning = watch.check(pinned(80 * MIB, 100 * MIB), SECOND);
        assertThat(warning).startsWith("RDMA registrations have pinned 80 % of RLIMIT_MEMLOCK: 80 MiB pinned")
                .contains("of RLIMIT_MEMLOCK 100 MiB").contains("ulimit -l").contains("LimitMEMLOCK=")
                .contains("--ulimit memlock");
        assertThat(watch.check(pinned(90 * MIB, 100 * MIB), 2 * SECOND)).as("still above: no new crossing").isNull();
        assertThat(watch.check(pinned(10 * MIB, 100 * MIB), 3 * SECOND)).isNull();
        assertThat(watch.check(pinned(85 * MIB, 100 * MIB), 4 * SECOND)).as("crossed again within the interval")
                .isNull();
        assertThat(watch.check(pinned(10 * MIB, 100 * MIB), 5 * SECOND)).isNull();
        assertThat(watch.check(pinned(95 * MIB, 100 * MIB), 70 * SECOND)).as("crossed after the interval")
                .contains("95 %");
    }

    @Test
    void noWarningWithoutALimit() {
        PinnedMemoryWatch watch = new PinnedMemoryWatch(80, 0);
        assertThat(watch.check(pinned(1L << 40, ResourceLimits.UNLIMITED), 0)).isNull();
        PinnedMemory.Snapshot capable = PinnedMemory.snapshot(99 * MIB, "CapEff:\t000001ffffffffff\n", 100 * MIB);
        assertThat(capable.limited()).isFalse();
        assertThat(watch.check(capable, 0)).isNull();
    }

    @Test
    void countsWhatTheKernelCountsWhenItIsMore() {
        PinnedMemory.Snapshot s = PinnedMemory.snapshot(4 * MIB, "VmPin:\t 8192 kB\nCapEff:\t0\n", 16 * MIB);
        assertThat(s.kernelPinned()).isEqualTo(8 * MIB);
        assertThat(s.pinned()).isEqualTo(8 * MIB);
        assertThat(s.usedFraction()).isEqualTo(0.5);
    }
}
