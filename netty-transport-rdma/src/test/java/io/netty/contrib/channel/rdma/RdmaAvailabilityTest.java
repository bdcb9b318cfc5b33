package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.verbs.NativeLibraries;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The library choice is static, so each case runs {@link AvailabilityProbe} in a fresh JVM with the test class
 * path and its own setting of {@value NativeLibraries#LIBRARY_PATH_PROPERTY}.
 */
class RdmaAvailabilityTest {

    @Test
    void systemLibrariesOnAMachineWithoutRdmaExplainWhatToDo() throws Exception {
        Map<String, String> probe = probe(null, Map.of());
        assertThat(probe.get("source")).isEqualTo("SYSTEM");
        assertThat(probe.get("available")).isEqualTo("false");
        assertThat(probe.get("cause")).isEqualTo("no RDMA device: ibv_get_device_list failed with ENOSYS (this"
                + " kernel has no RDMA support); to run on the bundled software device set"
                + " -Dio.netty.contrib.rdma.libraryPath=bundled");
        assertThat(probe.get("ensureAvailability")).startsWith("failed to load the RDMA transport: no RDMA device");
    }

    @Test
    void bundledSoftwareDeviceIsAvailable() throws Exception {
        Map<String, String> probe = probe("bundled", Map.of());
        assertThat(probe.get("source")).isEqualTo("BUNDLED");
        assertThat(probe.get("cause")).as("unavailability cause").isEmpty();
        assertThat(probe.get("available")).isEqualTo("true");
        assertThat(probe.get("ensureAvailability")).isEqualTo("ok");
    }

    @Test
    void environmentVariableSelectsTheLibrariesWhenThePropertyIsUnset() throws Exception {
        Map<String, String> probe = probe(null, Map.of(NativeLibraries.LIBRARY_PATH_ENV, "bundled"));
        assertThat(probe.get("source")).isEqualTo("BUNDLED");
        assertThat(probe.get("available")).isEqualTo("true");
    }

    @Test
    void directoryWithoutTheLibrariesSaysWhatIsMissing(@TempDir Path empty) throws Exception {
        Map<String, String> probe = probe(empty.toString(), Map.of());
        assertThat(probe.get("source")).isEqualTo("DIRECTORY");
        assertThat(probe.get("available")).isEqualTo("false");
        assertThat(probe.get("cause")).contains("cannot load the RDMA libraries from " + empty)
                .contains(empty.resolve("libibverbs.so.1") + " does not exist");
    }

    @Test
    void directoryHoldingTheSoftwareDeviceIsUsed() throws Exception {
        Path built = Path.of(System.getProperty("basedir", "")).toAbsolutePath().resolve("../native/build/lib")
                .normalize();
        Map<String, String> probe = probe(built.toString(), Map.of());
        assertThat(probe.get("source")).isEqualTo("DIRECTORY");
        assertThat(probe.get("cause")).as("unavailability cause").isEmpty();
        assertThat(probe.get("available")).isEqualTo("true");
    }

    private static Map<String, String> probe(String libraryPath, Map<String, String> environment)
            throws Exception {
        String classPath = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
        List<String> command = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-cp", classPath));
        if (libraryPath != null) {
            command.add("-D" + NativeLibraries.LIBRARY_PATH_PROPERTY + "=" + libraryPath);
        }
        command.add(AvailabilityProbe.class.getName());
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        builder.environment().remove(NativeLibraries.LIBRARY_PATH_ENV);
        builder.environment().putAll(environment);
        Process process = builder.start();
        String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(process.waitFor(60, TimeUnit.SECONDS)).isTrue();
        assertThat(process.exitValue()).as("probe output:%n%s", output).isZero();
        Map<String, String> values = new LinkedHashMap<>();
        for (String line : output.split("\\R")) {
            int eq = line.indexOf('=');
            if (eq > 0) {
                values.put(line.substring(0, eq), line.substring(eq + 1));
            }
        }
        assertThat(values).as("probe output:%n%s", output).containsKeys("available", "source", "cause");
        return values;
    }

}
