package io.netty.contrib.channel.rdma.internal.memory;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

class MemoryRegistrationExceptionTest {
    private static final String PROC_LIMITS = """
            Limit                     Soft Limit           Hard Limit           Units    \s
            Max cpu time              unlimited            unlimited            seconds  \s
            Max locked memory         8388608              16777216             bytes    \s
            Max address space         unlimited            unlimited            bytes    \s
            """;

    @Test
    void readsTheSoftLockedMemoryLimit() {
        assertThat(MemoryRegistrationException.lockedMemoryLimit(PROC_LIMITS)).isEqualTo("8388608");
        assertThat(MemoryRegistrationException.lockedMemoryLimit(
                PROC_LIMITS.replace("8388608 ", "unlimited"))).isEqualTo("unlimited");
        assertThat(MemoryRegistrationException.lockedMemoryLimit("Max cpu time 1 1 seconds")).isNull();
        assertThat(MemoryRegistrationException.lockedMemoryLimit(null)).isNull();
    }

    @Test
    void messageNamesTheLimitAndHowToRaiseIt() {
        RuntimeException cause = new RuntimeException("ibv_reg_mr: Cannot allocate memory");
        assertThat(MemoryRegistrationException.message(64L << 20, 4L << 20, "8388608", cause)).isEqualTo(
                "memory registration of 64 MiB failed (4 MiB already registered by this allocator): "
                + "RLIMIT_MEMLOCK is 8 MiB; raise it with ulimit -l (systemd: LimitMEMLOCK=, Docker: "
                + "--ulimit memlock=-1): ibv_reg_mr: Cannot allocate memory");
        assertThat(MemoryRegistrationException.message(4L << 20, 0, "unlimited", null)).isEqualTo(
                "memory registration of 4 MiB failed (0 B already registered by this allocator): "
                + "RLIMIT_MEMLOCK is unlimited, so the device or the kernel ran out of memory");
        assertThat(MemoryRegistrationException.message(4096, 0, null, null))
                .contains("4 KiB").contains("RLIMIT_MEMLOCK is unknown; check it with ulimit -l");
    }

    @Test
    void readsThisProcessLimit() {
        MemoryRegistrationException e = MemoryRegistrationException.of(2L << 30, 0, new RuntimeException("ENOMEM"));
        assertThat(e).hasMessageStartingWith("memory registration of 2 GiB failed")
                     .hasMessageContaining("RLIMIT_MEMLOCK is ")
                     .hasMessageNotContaining("unknown")
                     .hasMessageEndingWith(": ENOMEM");
    }

    @Test
    void aConnectionsRegistrationSaysWhatItWasFor() {
        MemoryRegistrationException e = MemoryRegistrationException.of("a connection's receive ring", 4L << 20,
                new RuntimeException("ibv_reg_mr failed: Cannot allocate memory (ENOMEM)"));
        assertThat(e).hasMessageStartingWith("memory registration of 4 MiB failed (a connection's receive ring): "
                + "RLIMIT_MEMLOCK is ").hasMessageEndingWith("(ENOMEM)");
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
