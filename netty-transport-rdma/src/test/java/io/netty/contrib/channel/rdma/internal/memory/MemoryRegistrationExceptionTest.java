package io.netty.contrib.channel.rdma.internal.memory;

import io.netty.contrib.channel.rdma.internal.verbs.ResourceLimits;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

class MemoryRegistrationExceptionTest {
    private static final String STATUS = """
            Name:\tjava
            VmLck:\t       0 kB
            VmPin:\t    6144 kB
            CapEff:\t000001fffeffbfff
            """;

    @Test
    void messageNamesTheLimitWhatIsPinnedAndTheFix() {
        RuntimeException cause = new RuntimeException("ibv_reg_mr: Cannot allocate memory");
        PinnedMemory.Snapshot limited = PinnedMemory.snapshot(4L << 20, STATUS, 8L << 20);
        assertThat(MemoryRegistrationException.message(64L << 20, "4 MiB already registered by this allocator",
                limited, cause)).isEqualTo(
                "memory registration of 64 MiB failed (4 MiB already registered by this allocator): "
                + "RLIMIT_MEMLOCK is 8 MiB and this process has 6 MiB pinned (4 MiB in memory regions, VmPin 6 MiB);"
                + " raise it with ulimit -l, LimitMEMLOCK= in the systemd unit, or --ulimit memlock=-1 in docker"
                + " (or grant CAP_IPC_LOCK): ibv_reg_mr: Cannot allocate memory");
        PinnedMemory.Snapshot unlimited = PinnedMemory.snapshot(0, STATUS.replace("6144", "0"),
                ResourceLimits.UNLIMITED);
        assertThat(MemoryRegistrationException.message(4L << 20, "a connection's receive ring", unlimited, null))
                .isEqualTo("memory registration of 4 MiB failed (a connection's receive ring): RLIMIT_MEMLOCK is"
                        + " unlimited and 0 B is pinned, so the device or the kernel ran out of memory");
        PinnedMemory.Snapshot capable = PinnedMemory.snapshot(0, STATUS.replace("bfff", "ffff"), 1L << 20);
        assertThat(MemoryRegistrationException.message(4096, "x", capable, null))
                .contains("4 KiB").contains("RLIMIT_MEMLOCK does not apply (CAP_IPC_LOCK)");
    }

    @Test
    void readsThisProcessLimit() {
        MemoryRegistrationException e = MemoryRegistrationException.of(2L << 30, 0, new RuntimeException("ENOMEM"));
        assertThat(e).hasMessageStartingWith("memory registration of 2 GiB failed")
                     .hasMessageContaining("RLIMIT_MEMLOCK ")
                     .hasMessageEndingWith(": ENOMEM");
    }

    @Test
    void aConnectionsRegistrationSaysWhatItWasFor() {
        MemoryRegistrationException e = MemoryRegistrationException.of("a connection's receive ring", 4L << 20,
                new RuntimeException("ibv_reg_mr failed: Cannot allocate memory (ENOMEM)"));
        assertThat(e).hasMessageStartingWith("memory registration of 4 MiB failed (a connection's receive ring): "
                + "RLIMIT_MEMLOCK ").hasMessageEndingWith("(ENOMEM)");
    }

    @Test
    void formatsSizes() {
        assertThat(MemoryRegistrationException.formatSize(100)).isEqualTo("100 B");
        assertThat(MemoryRegistrationException.formatSize(1536)).isEqualTo("1536 B");
        assertThat(MemoryRegistrationException.formatSize(65536)).isEqualTo("64 KiB");
        assertThat(MemoryRegistrationException.formatSize(3L << 20)).isEqualTo("3 MiB");
        assertThat(MemoryRegistrationException.formatSize(1L << 30)).isEqualTo("1 GiB");
    }
}
