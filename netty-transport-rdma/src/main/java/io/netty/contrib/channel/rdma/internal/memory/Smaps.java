package io.netty.contrib.channel.rdma.internal.memory;

import java.io.BufferedReader;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * One mapping's entry in {@code /proc/self/smaps}: how the kernel backs it. Reading stops at the mapping, but the
 * kernel walks the page tables of every mapping before it: milliseconds in a JVM, so not for the data path.
 */
public final class Smaps {
    private static final Path SMAPS = Path.of("/proc/self/smaps");

    private Smaps() {
    }

    /**
     * The mapping that contains {@code address}: its {@code KernelPageSize} and {@code AnonHugePages} in bytes and
     * its range; {@code null} if no mapping contains it or smaps is unreadable.
     */
    public static Entry entry(long address) {
        try (BufferedReader in = Files.newBufferedReader(SMAPS)) {
            boolean inside = false;
            long start = 0;
            long end = 0;
            long kernelPageSize = -1;
            long anonHuge = -1;
            for (String line; (line = in.readLine()) != null; ) {
                int dash = line.indexOf('-');
                int space = line.indexOf(' ');
                if (dash > 0 && space > dash && isHex(line, 0, dash)) {
                    if (inside) {
                        break;
                    }
                    start = Long.parseUnsignedLong(line.substring(0, dash), 16);
                    end = Long.parseUnsignedLong(line.substring(dash + 1, space), 16);
                    inside = Long.compareUnsigned(address, start) >= 0 && Long.compareUnsigned(address, end) < 0;
                } else if (inside && line.startsWith("KernelPageSize:")) {
                    kernelPageSize = kib(line);
                } else if (inside && line.startsWith("AnonHugePages:")) {
                    anonHuge = kib(line);
                }
            }
            return inside ? new Entry(start, end, kernelPageSize, anonHuge) : null;
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    /** {@code AnonHugePages} of the mapping that contains {@code address}, in bytes; -1 if unknown. */
    static long anonHugeBytes(long address) {
        Entry e = entry(address);
        return e == null ? -1 : e.anonHugePages();
    }

    /** A mapping: {@code [start, end)}, its kernel page size and its bytes on transparent huge pages. */
    public record Entry(long start, long end, long kernelPageSize, long anonHugePages) {
    }

    private static boolean isHex(String s, int from, int to) {
        for (int i = from; i < to; i++) {
            if (Character.digit(s.charAt(i), 16) < 0) {
                return false;
            }
        }
        return to > from;
    }

    private static long kib(String line) {
        String[] f = line.trim().split("\\s+");
        return Long.parseLong(f[1]) * 1024;
    }
}
