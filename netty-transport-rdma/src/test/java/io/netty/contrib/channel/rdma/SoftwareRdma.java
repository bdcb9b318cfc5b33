package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.verbs.NativeLibraries;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.invoke.MethodHandle;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Runs the transport tests of this JVM on the bundled software RDMA device (unless a library path was chosen
 * explicitly, e.g. the system's rdma-core on the kernel's rxe) and reads the software device's object counts for
 * leak checks.
 */
final class SoftwareRdma {
    static final String LIBRARY_PATH = "io.netty.contrib.rdma.libraryPath";
    static final List<String> KINDS = List.of("context", "pd", "mr", "cq", "comp_channel", "qp", "srq", "cm_id",
            "cm_channel", "mw");

    static {
        if (System.getProperty(LIBRARY_PATH) == null && System.getenv("NETTY_RDMA_LIBRARY_PATH") == null) {
            System.setProperty(LIBRARY_PATH, "bundled");
        }
        assertThat(Rdma.unavailabilityCause()).as("RDMA unavailability cause").isNull();
    }

    private SoftwareRdma() {
    }

    static void use() {
    }

    /** Whether the device in use counts its objects (only the software device does). */
    static boolean hasObjectCounts() {
        return NativeLibraries.isSoftwareDevice();
    }

    /** Why there are no object counts here: the reason for skipping a check that needs them. */
    static String noObjectCounts() {
        return "device object counts exist only on the software device (softrdma_object_count), this test runs on "
                + NativeLibraries.description();
    }

    /** {@code softrdma_object_count} of every kind, in this process. */
    static Map<String, Long> objectCounts() {
        MethodHandle count = Linker.nativeLinker().downcallHandle(
                NativeLibraries.findIbverbs("softrdma_object_count")
                        .orElseThrow(() -> new AssertionError(noObjectCounts())),
                FunctionDescriptor.of(JAVA_LONG, ADDRESS));
        Map<String, Long> counts = new LinkedHashMap<>();
        try (Arena arena = Arena.ofConfined()) {
            for (String kind : KINDS) {
                counts.put(kind, (long) count.invokeExact(arena.allocateFrom(kind)));
            }
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
        return counts;
    }
}
