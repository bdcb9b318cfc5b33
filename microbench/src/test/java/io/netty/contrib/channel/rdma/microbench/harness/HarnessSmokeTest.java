package io.netty.contrib.channel.rdma.microbench.harness;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

import javax.imageio.ImageIO;
import java.awt.image.BufferedImage;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Runs the harness with tiny counts for NIO and RdmaChannel (adaptive, on the bundled software device) and checks
 * what it writes: results.json is well-formed and has a row for every measurement asked for, the chart is a
 * PNG, the page and the table exist. No timing is checked: this proves the harness works, not how fast anything is.
 */
class HarnessSmokeTest {
    private static final int[] SIZES = {64, 65536};
    private static final int[] CONNECTIONS = {1, 2};

    @Test
    @Timeout(value = 90, unit = TimeUnit.SECONDS)
    void quickRunWritesEveryRow(@TempDir Path dir) throws Exception {
        Path out = dir.resolve("benchmarks");
        Path page = dir.resolve("benchmarks.md");
        int exit = runQuick(out, page, "--sizes", "64,65536", "--connections", "1,2", "--fresh-sizes", "64",
                "--idle-seconds", "0.5");
        assertThat(exit).as("harness exit code").isZero();

        Object json = Json.parse(Files.readString(out.resolve("results.json")));
        assertThat(json).isInstanceOf(List.class);
        Set<String> rows = new HashSet<>();
        for (Object o : (List<?>) json) {
            assertThat(o).isInstanceOf(Map.class);
            Map<?, ?> row = (Map<?, ?>) o;
            assertThat(row.get("transport")).isInstanceOf(String.class);
            assertThat(row.get("mode")).isInstanceOf(String.class);
            assertThat(row.get("metric")).isInstanceOf(String.class);
            assertThat(row.get("unit")).isInstanceOf(String.class);
            assertThat(row.get("connections")).isInstanceOf(Double.class);
            assertThat(row.get("value")).as("value of %s", row).isInstanceOf(Double.class);
            assertThat((Double) row.get("value")).as("value of %s", row).isGreaterThanOrEqualTo(0);
            Object size = row.containsKey("size") ? ((Double) row.get("size")).intValue() : "-";
            rows.add(row.get("transport") + "/" + row.get("mode") + "/" + size + "/"
                    + ((Double) row.get("connections")).intValue() + "/" + row.get("metric"));
        }
        assertThat(rows).containsAll(expectedRows("nio/tcp", false));
        assertThat(rows).containsAll(expectedRows("rdma/adaptive", true));

        BufferedImage chart = ImageIO.read(out.resolve("benchmarks.png").toFile());
        assertThat(chart).as("benchmarks.png is a readable image").isNotNull();
        assertThat(chart.getWidth()).isPositive();
        assertThat(Files.readString(out.resolve("results.md"))).contains("### Echo round trip", "### Goals",
                "### Streaming throughput, fresh buffers");
        assertThat(Files.readString(page)).contains("## Machine", "](benchmarks/benchmarks.png)",
                "RdmaChannel (adaptive)", "Netty NIO (TCP)");
    }

    /** {@code --repeat 2}: every row twice, each JSON object naming its repeat, the page saying what it shows. */
    @Test
    @Timeout(value = 90, unit = TimeUnit.SECONDS)
    void repeatedRunWritesEachRepeat(@TempDir Path dir) throws Exception {
        Path out = dir.resolve("benchmarks");
        Path page = dir.resolve("benchmarks.md");
        int exit = runQuick(out, page, "--sizes", "64", "--connections", "1", "--fresh-sizes", "",
                "--idle-seconds", "0", "--repeat", "2");
        assertThat(exit).as("harness exit code").isZero();
        Set<String> rows = new HashSet<>();
        for (Object o : (List<?>) Json.parse(Files.readString(out.resolve("results.json")))) {
            Map<?, ?> row = (Map<?, ?>) o;
            if ("rtt_p50".equals(row.get("metric"))) {
                rows.add(row.get("transport") + "/" + ((Double) row.get("repeat")).intValue());
            }
        }
        assertThat(rows).containsExactlyInAnyOrder("nio/1", "nio/2", "rdma/1", "rdma/2");
        assertThat(Files.readString(page)).contains("Every row ran 2 times");
    }

    /** The harness on NIO and RdmaChannel (adaptive) with tiny phases, writing to {@code out} and {@code page}. */
    private static int runQuick(Path out, Path page, String... rows) throws Exception {
        List<String> args = new ArrayList<>(List.of("--quick", "--transports", "nio,rdma", "--latency-warmup", "0.1",
                "--latency-seconds", "0.2", "--throughput-warmup", "0.05", "--throughput-seconds", "0.2",
                "--out", out.toString(), "--page", page.toString()));
        args.addAll(List.of(rows));
        return Harness.run(args.toArray(String[]::new));
    }

    private static List<String> expectedRows(String series, boolean idle) {
        List<String> rows = new ArrayList<>();
        for (int size : SIZES) {
            for (String metric : List.of("rtt_p50", "rtt_p99", "rtt_p99_9", "echoes", "heap_per_echo_server",
                    "heap_per_echo_client", "cpu_per_echo_server", "cpu_per_echo_client")) {
                rows.add(series + "/" + size + "/1/" + metric);
            }
            for (int c : CONNECTIONS) {
                rows.add(series + "/" + size + "/" + c + "/throughput_msgs");
                rows.add(series + "/" + size + "/" + c + "/throughput_bytes");
            }
        }
        for (int c : CONNECTIONS) {
            rows.add(series + "/64/" + c + "/fresh_throughput_msgs");
            rows.add(series + "/64/" + c + "/fresh_throughput_bytes");
        }
        if (idle) {
            rows.add(series + "/-/1/idle_cpu_loop_server");
            rows.add(series + "/-/1/idle_cpu_process_server");
            rows.add(series + "/-/1/idle_cpu_loop_client");
        }
        return rows;
    }
}
