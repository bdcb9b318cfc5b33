package io.netty.contrib.channel.rdma.microbench.harness;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * One measurement.
 *
 * @param transport   {@code rdma}, {@code verbs} (perftest on the same device), {@code epoll} or {@code nio}
 * @param mode        the loop mode ({@code adaptive}, {@code busy-poll}), the perftest program, or {@code tcp}
 * @param size        message bytes; 0 when the measurement has no size (idle CPU)
 * @param connections connections (queue pairs) used at once
 * @param metric      what was measured, e.g. {@code rtt_p99}, {@code throughput_bytes}
 * @param value       the number
 * @param unit        its unit, e.g. {@code us}, {@code GB/s}
 */
record Result(String transport, String mode, int size, int connections, String metric, double value, String unit) {

    /** Parses a tab-separated {@code result} line printed by {@link BenchClient}. */
    static Result parseLine(String line) {
        String[] f = line.split("\t");
        if (f.length != 8 || !"result".equals(f[0])) {
            throw new IllegalArgumentException("not a result line: " + line);
        }
        return new Result(f[1], f[2], Integer.parseInt(f[3]), Integer.parseInt(f[4]), f[5],
                Double.parseDouble(f[6]), f[7]);
    }

    /** One JSON object; {@code repeat} (counted from 1) is written when it is above 0. */
    String toJson(int repeat) {
        StringBuilder b = new StringBuilder("{");
        if (repeat > 0) {
            b.append("\"repeat\": ").append(repeat).append(", ");
        }
        field(b, "transport", transport).append(", ");
        field(b, "mode", mode).append(", ");
        if (size > 0) {
            b.append("\"size\": ").append(size).append(", ");
        }
        b.append("\"connections\": ").append(connections).append(", ");
        field(b, "metric", metric).append(", ");
        b.append("\"value\": ").append(Double.isFinite(value) ? String.format(Locale.ROOT, "%.6g", value) : "null")
                .append(", ");
        field(b, "unit", unit);
        return b.append('}').toString();
    }

    /** Every repeat's measurements, each object naming its repeat when there was more than one. */
    static String toJson(List<List<Result>> repeats) {
        List<String> objects = new ArrayList<>();
        for (int i = 0; i < repeats.size(); i++) {
            for (Result r : repeats.get(i)) {
                objects.add(r.toJson(repeats.size() > 1 ? i + 1 : 0));
            }
        }
        return "[\n" + (objects.isEmpty() ? "" : "  " + String.join(",\n  ", objects) + "\n") + "]\n";
    }

    private static StringBuilder field(StringBuilder b, String name, String value) {
        b.append('"').append(name).append("\": \"");
        for (char c : value.toCharArray()) {
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"');
    }
}
