package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.Main;
import io.netty.contrib.channel.rdma.internal.verbs.NativeLibraries;
import io.netty.contrib.channel.rdma.internal.verbs.TestAddress;
import io.netty.contrib.channel.rdma.internal.verbs.VerbsDevice;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@link Rdma#diagnose(String)} in this JVM (the device the tests run on), and {@link Main} ({@code java -jar ...
 * diagnose}) in fresh JVMs whose class path holds only this module's classes, as with {@code java -jar}: on the
 * bundled software device, on the system's libraries, and on a directory without libraries.
 */
@Timeout(120)
class RdmaDiagnosticsTest {

    @Test
    void reportsTheDevicePortsGidsMemoryAndBindability() {
        SoftwareRdma.use();
        String report = Rdma.diagnose(TestAddress.host());
        System.out.println(report);
        assertThat(report).contains("Libraries", "loaded:", "status:   available", "Devices (verbs)",
                "RLIMIT_MEMLOCK:", "huge pages:", "bind " + TestAddress.host() + ": ok (device ", "Problems: none");
        for (VerbsDevice device : VerbsDevice.list()) {
            assertThat(report).contains("  " + device.name() + ": node GUID ");
        }
        assertThat(report).containsPattern("port 1: ACTIVE, link layer (Ethernet \\(RoCE\\)|InfiniBand), MTU active")
                .containsPattern("GID\\[\\d+] [0-9a-f:]{39}  (RoCE v2|RoCE v1|IB)");
        // the connection section: a connection to itself, both queue pairs read back with the defaults
        assertThat(report).contains("Connection", "asked: traffic class 0, ACK timeout rdma_cm's, retry count 7")
                .containsPattern("client: \\S+ port 1, GID\\[\\d+] [0-9a-f:]{39} (RoCE v2|RoCE v1|IB), traffic class"
                        + " 0 \\(DSCP 0\\), SL \\d+, path MTU \\d+, ACK timeout \\d+ .*retry count 7,"
                        + " RNR retry count 7")
                .contains("  server: ");
    }

    @Test
    void theConnectionSectionShowsWhatTheQueuePairsGotForTheAskedSettings() {
        SoftwareRdma.use();
        String[] keys = {"trafficClass", "ackTimeout", "retryCount", "rnrRetryCount", "minRnrTimer"};
        String[] values = {"104", "17", "3", "5", "9"};
        for (int i = 0; i < keys.length; i++) {
            System.setProperty("io.netty.contrib.rdma.diagnose." + keys[i], values[i]);
        }
        try {
            String report = Rdma.diagnose(TestAddress.host());
            assertThat(report).contains("asked: traffic class 104, ACK timeout 17, retry count 3, RNR retry count 5,"
                    + " min RNR timer 9");
            // as on a channel: the client's traffic class and retry count on both, each RNR retry count on the peer
            for (String end : new String[] {"client: ", "server: "}) {
                assertThat(report).containsPattern(end + ".*traffic class 104 \\(DSCP 26\\).*ACK timeout 17 .*retry"
                        + " count 3, RNR retry count 5, min RNR timer 9 \\(0.24 ms\\)");
            }
        } finally {
            for (String key : keys) {
                System.clearProperty("io.netty.contrib.rdma.diagnose." + key);
            }
        }
    }

    @Test
    void theConnectionSectionShowsTheServiceLevelAndPathMtuOfQueuePairsItDrivesItself() {
        SoftwareRdma.use();
        System.setProperty("io.netty.contrib.rdma.diagnose.serviceLevel", "3");
        // below rdma_cm's MTU also on kernel rxe (1024 on the guest's 1500-byte netdev)
        System.setProperty("io.netty.contrib.rdma.diagnose.pathMtu", "512");
        try {
            String report = Rdma.diagnose(TestAddress.host());
            assertThat(report).contains(", SL 3, path MTU cap 512 (");
            java.util.regex.Matcher device = java.util.regex.Pattern.compile("client: (\\S+) port").matcher(report);
            assertThat(device.find()).as(report).isTrue();
            int sl = RdmaFabricOptionsTest.keepsServiceLevel(device.group(1)) ? 3 : 0;
            for (String end : new String[] {"client: ", "server: "}) {
                assertThat(report).containsPattern(end + ".*, SL " + sl + ", path MTU 512, ");
            }
            System.setProperty("io.netty.contrib.rdma.diagnose.pathMtu", "1000");
            assertThat(Rdma.diagnose(TestAddress.host()))
                    .contains("io.netty.contrib.rdma.diagnose.pathMtu: 1000 (expected: 256, 512, 1024, 2048 or 4096");
        } finally {
            System.clearProperty("io.netty.contrib.rdma.diagnose.serviceLevel");
            System.clearProperty("io.netty.contrib.rdma.diagnose.pathMtu");
        }
    }

    @Test
    void anAddressNoDeviceHasIsAProblemWithItsFix() {
        SoftwareRdma.use();
        // TEST-NET-3: on no interface of this host.
        String report = Rdma.diagnose("203.0.113.77");
        assertThat(report).contains("bind 203.0.113.77: failed, ")
                .contains("rdma_cm cannot bind 203.0.113.77")
                .contains("fix: ")
                .doesNotContain("Problems: none");
    }

    @Test
    void jarMainOnTheBundledDevice() throws Exception {
        Result r = runMain(NativeLibraries.BUNDLED, "diagnose", "127.0.0.1");
        assertThat(r.output).contains("the bundled software RDMA device", "bind 127.0.0.1: ok", "Problems: none");
        assertThat(r.exit).as(r.output).isZero();
    }

    @Test
    void jarMainOnTheSystemLibrariesSaysWhatIsMissingWithoutCrashing() throws Exception {
        Result r = runMain(null, "diagnose");
        assertThat(r.output).contains("selected: the system's libibverbs.so.1 and librdmacm.so.1", "Memory",
                "Problems: ").doesNotContain("Exception in thread", "\tat ");
        if (r.output.contains("Problems: none")) {
            assertThat(r.exit).isZero();
        } else {
            assertThat(r.output).contains("fix: ");
            assertThat(r.exit).as(r.output).isEqualTo(1);
        }
    }

    @Test
    void jarMainWithoutLibrariesSaysSo(@TempDir Path empty) throws Exception {
        Result r = runMain(empty.toString(), "diagnose");
        assertThat(r.output).contains("loaded:   nothing: cannot load the RDMA libraries from " + empty,
                "the RDMA libraries did not load", "fix: ").doesNotContain("Exception in thread");
        assertThat(r.exit).isEqualTo(1);
    }

    @Test
    void jarMainWithoutACommandPrintsUsage() throws Exception {
        Result r = runMain(null);
        assertThat(r.output).startsWith("usage: ");
        assertThat(r.exit).isEqualTo(2);
    }

    private record Result(int exit, String output) {
    }

    /** {@link Main} in a fresh JVM with only this module's classes (no Netty), as {@code java -jar} has. */
    private static Result runMain(String libraryPath, String... args) throws Exception {
        Path classes = Path.of(Main.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        List<String> command = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-cp", classes.toString()));
        if (libraryPath != null) {
            command.add("-D" + NativeLibraries.LIBRARY_PATH_PROPERTY + "=" + libraryPath);
        }
        command.add(Main.class.getName());
        command.addAll(List.of(args));
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        builder.environment().remove(NativeLibraries.LIBRARY_PATH_ENV);
        Process process = builder.start();
        byte[] output = process.getInputStream().readAllBytes();
        assertThat(process.waitFor(60, TimeUnit.SECONDS)).isTrue();
        return new Result(process.exitValue(), new String(output, StandardCharsets.UTF_8));
    }
}
