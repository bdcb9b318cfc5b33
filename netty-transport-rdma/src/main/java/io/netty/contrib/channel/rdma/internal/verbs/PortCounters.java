package io.netty.contrib.channel.rdma.internal.verbs;

import java.io.IOException;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.stream.Stream;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * A port's counters, read where the device keeps them: a kernel device in
 * {@code /sys/class/infiniband/<dev>/ports/<n>/counters/*} (the IB PMA counters) and {@code hw_counters/*} (the
 * driver's: kernel rxe's {@code rcvd_rnr_err}, {@code retry_exceeded_err}, ...), the software device through its
 * {@code softrdma_hw_counter} export under the same names as rxe's {@code hw_counters} (its device lives in this
 * process, so there is no file to read). Names are {@code group/name}: {@code counters/port_xmit_data},
 * {@code hw_counters/rcvd_rnr_err}.
 */
public final class PortCounters {
    public static final String COUNTERS = "counters";
    public static final String HW_COUNTERS = "hw_counters";
    private static final Path SYSFS = Path.of("/sys/class/infiniband");

    private PortCounters() {
    }

    /** Every counter of {@code device} port {@code port} with its value now; empty if the device has none. */
    public static Map<String, Long> read(String device, int port) {
        Map<String, Long> values = new LinkedHashMap<>();
        if (Software.NAME != null) {
            for (int i = 0; ; i++) {
                String name = Software.name(i);
                if (name == null) {
                    break;
                }
                values.put(HW_COUNTERS + "/" + name, Software.value(name));
            }
            return values;
        }
        Path dir = SYSFS.resolve(device).resolve("ports").resolve(String.valueOf(port));
        for (String group : new String[] {COUNTERS, HW_COUNTERS}) {
            try (Stream<Path> files = Files.list(dir.resolve(group))) {
                files.sorted().forEach(f -> {
                    long v = readFile(f);
                    if (v >= 0) {
                        values.put(group + "/" + f.getFileName(), v);
                    }
                });
            } catch (IOException | RuntimeException e) {
                // no such group on this device (kernel rxe 6.1 has no PMA counters)
            }
        }
        return values;
    }

    /** One counter ({@code group/name}) now; -1 if it cannot be read. */
    public static long read(String device, int port, String name) {
        if (Software.NAME != null) {
            return name.startsWith(HW_COUNTERS + "/") ? Software.value(name.substring(HW_COUNTERS.length() + 1)) : -1;
        }
        return readFile(SYSFS.resolve(device).resolve("ports").resolve(String.valueOf(port)).resolve(name));
    }

    /** A counter file's value; -1 for what is not a counter ({@code lifespan} is a setting) or unreadable. */
    private static long readFile(Path file) {
        if (file.getFileName().toString().equals("lifespan")) {
            return -1;
        }
        try {
            return Long.parseUnsignedLong(Files.readString(file).trim());
        } catch (IOException | RuntimeException e) {
            return -1;
        }
    }

    /** The software device's counters, when it is the library loaded. */
    private static final class Software {
        static final MethodHandle NAME = NativeLibraries.findIbverbs("softrdma_hw_counter_name")
                .map(s -> Downcalls.LINKER.downcallHandle(s, FunctionDescriptor.of(ADDRESS, JAVA_INT)))
                .orElse(null);
        static final MethodHandle VALUE = NativeLibraries.findIbverbs("softrdma_hw_counter")
                .map(s -> Downcalls.LINKER.downcallHandle(s, FunctionDescriptor.of(JAVA_LONG, ADDRESS)))
                .orElse(null);

        static String name(int index) {
            try {
                MemorySegment name = (MemorySegment) NAME.invokeExact(index);
                return name.address() == 0 ? null : name.reinterpret(256).getString(0);
            } catch (Throwable t) {
                throw LibIbverbs.rethrow(t);
            }
        }

        static long value(String name) {
            try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
                return (long) VALUE.invokeExact(arena.allocateFrom(name));
            } catch (Throwable t) {
                throw LibIbverbs.rethrow(t);
            }
        }
    }
}
