package io.netty.contrib.channel.rdma.microbench.harness;

import io.netty.util.Version;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.List;

/** What the numbers were measured on. */
record Machine(int cores, String cpu, String kernel, String jdk, String netty, String date, String loadBefore,
               String loadAfter) {

    static Machine describe() {
        String netty = Version.identify().values().stream()
                .filter(v -> v.artifactId().equals("netty-transport"))
                .map(Version::artifactVersion).findFirst().orElse("unknown");
        return new Machine(Runtime.getRuntime().availableProcessors(), cpuModel(), System.getProperty("os.name")
                + " " + System.getProperty("os.version"), System.getProperty("java.vm.vendor") + " "
                + System.getProperty("java.runtime.version"), netty,
                ZonedDateTime.now(ZoneOffset.UTC).format(DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm 'UTC'")),
                loadAverage(), null);
    }

    /** The same machine, with the load average read now as the one after the run. */
    Machine finished() {
        return new Machine(cores, cpu, kernel, jdk, netty, date, loadBefore, loadAverage());
    }

    /** The 1, 5 and 15 minute load averages, as {@code uptime} prints them. */
    static String loadAverage() {
        try {
            String[] f = Files.readString(Path.of("/proc/loadavg")).trim().split("\\s+");
            return f[0] + ", " + f[1] + ", " + f[2];
        } catch (IOException | RuntimeException e) {
            return "unknown";
        }
    }

    /** The 1-minute load average, or -1 if unknown. */
    static double loadAverage1() {
        try {
            return Double.parseDouble(Files.readString(Path.of("/proc/loadavg")).trim().split("\\s+")[0]);
        } catch (IOException | RuntimeException e) {
            return -1;
        }
    }

    private static String cpuModel() {
        try {
            List<String> lines = Files.readAllLines(Path.of("/proc/cpuinfo"));
            for (String line : lines) {
                if (line.startsWith("model name")) {
                    return line.substring(line.indexOf(':') + 1).trim();
                }
            }
        } catch (IOException e) {
            // fall through
        }
        return System.getProperty("os.arch");
    }
}
