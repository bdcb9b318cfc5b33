package io.netty.contrib.channel.rdma;

import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.contrib.channel.rdma.internal.memory.PinnedMemory;
import io.netty.contrib.channel.rdma.internal.verbs.NativeLibraries;
import io.netty.contrib.channel.rdma.internal.verbs.ResourceLimits;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Pinned memory against {@code RLIMIT_MEMLOCK}: the metric follows registrations, and a JVM started under a limit
 * of 4.5 MiB without {@code CAP_IPC_LOCK} ({@code prlimit --memlock}, {@code setpriv}) fits the pool's first 4 MiB
 * chunk but no 1 MiB receive ring: it warns as it passes 80 %, its large messages go by SEND with nothing lost, and
 * a registration past the limit fails naming the limit, what is pinned and the fix.
 */
@Timeout(180)
class RdmaPinnedMemoryTest {
    private static final long LIMIT = (4L << 20) + (512 << 10);

    @Test
    void metricFollowsRegistrations() throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        try {
            RdmaIoHandlerMetric m = RdmaIoHandler.metric(group.next());
            long before = m.pinnedMemory();
            RdmaByteBufAllocator alloc = RdmaByteBufAllocator.defaultAllocator();
            long registered = alloc.metric().registeredMemory();
            var buf = alloc.directBuffer(2 << 20); // a dedicated chunk of its own
            try {
                assertThat(alloc.metric().registeredMemory()).isEqualTo(registered + (2 << 20));
                assertThat(m.pinnedMemory()).isGreaterThanOrEqualTo(before + (2 << 20));
            } finally {
                buf.release();
            }
            assertThat(PinnedMemory.registered()).isLessThan(before + (2 << 20));
            PinnedMemory.Snapshot s = PinnedMemory.snapshot();
            assertThat(m.pinnedMemoryLimit()).isEqualTo(s.limited() ? s.limit() : -1);
        } finally {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).sync();
        }
    }

    @Test
    void aTightLimitIsNamedAndLargeMessagesGoBySend() throws Exception {
        Assumptions.assumeTrue(Files.isExecutable(Path.of("/usr/bin/prlimit"))
                && Files.isExecutable(Path.of("/usr/bin/setpriv")), "needs prlimit and setpriv (util-linux)");
        long hard = ResourceLimits.lockedMemoryHard();
        Assumptions.assumeTrue(hard == ResourceLimits.UNLIMITED || hard >= LIMIT,
                "the hard RLIMIT_MEMLOCK (" + hard + ") is below the soft limit the test sets");
        String classPath = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        List<String> command = new ArrayList<>(List.of("/usr/bin/prlimit", "--memlock=" + LIMIT + ":",
                "/usr/bin/setpriv", "--inh-caps=-ipc_lock", "--bounding-set=-ipc_lock",
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-cp", classPath));
        for (String property : new String[] {NativeLibraries.LIBRARY_PATH_PROPERTY, TestAddress.PROPERTY,
                RdmaConnection.KERNEL_RXE_RINGS_PROPERTY}) {
            if (System.getProperty(property) != null) {
                command.add("-D" + property + "=" + System.getProperty(property));
            }
        }
        command.addAll(List.of(MemlockProbe.class.getName(), "16", String.valueOf(256 << 10)));
        Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(process.waitFor(120, TimeUnit.SECONDS)).isTrue();
        assertThat(process.exitValue()).as("probe output:%n%s", output).isZero();
        Map<String, String> values = new LinkedHashMap<>();
        for (String line : output.split("\\R")) {
            int eq = line.indexOf('=');
            if (eq > 0 && !line.contains(" ")) {
                values.put(line.substring(0, eq), line.substring(eq + 1));
            } else if (line.startsWith("oversized=")) {
                values.put("oversized", line.substring("oversized=".length()));
            }
        }
        assertThat(values.get("echoed")).as("probe output:%n%s", output).isEqualTo("true");
        assertThat(values.get("ringWrites")).as("no ring could be registered").isEqualTo("0");
        assertThat(Long.parseLong(values.get("sends"))).as("16 x 256 KiB as 8 KiB SENDs").isGreaterThan(16 * 32);
        assertThat(values.get("pinnedMemoryLimit")).isEqualTo(String.valueOf(LIMIT));
        assertThat(Long.parseLong(values.get("pinnedMemory"))).isBetween(4L << 20, LIMIT);
        // The rings' arena does not even try: a block would leave less than half of the limit unpinned.
        // (Kernel rxe adds the kernel's VmPin to the figures: "4 MiB pinned (4 MiB in memory regions, VmPin 4 MiB)".)
        assertThat(output).as("the loop's log").contains("no receive ring of 4194304 bytes offered")
                .contains("4 MiB pinned (4 MiB in memory regions").contains("of RLIMIT_MEMLOCK 4608 KiB")
                .contains("RDMA registrations have pinned 89 % of RLIMIT_MEMLOCK");
        assertThat(values.get("oversized")).startsWith("memory registration of 2 MiB failed")
                .contains("RLIMIT_MEMLOCK is 4608 KiB and this process has 4 MiB pinned")
                .contains("ulimit -l").contains("LimitMEMLOCK=").contains("--ulimit memlock");
    }
}
