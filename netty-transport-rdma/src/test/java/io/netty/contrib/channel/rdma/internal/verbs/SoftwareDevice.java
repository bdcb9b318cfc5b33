package io.netty.contrib.channel.rdma.internal.verbs;

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
 * Selects the bundled software RDMA device for the tests of this JVM, unless a library path was chosen (e.g. the
 * system's rdma-core on the kernel's rxe, as {@code testsuite/rxe-vm} does), and exposes the software device's
 * object counters. The device is part of the build: if it is missing, the tests using it fail (never skip).
 */
final class SoftwareDevice {
    static final List<String> KINDS = List.of("context", "pd", "mr", "cq", "comp_channel", "qp", "srq", "cm_id",
            "cm_channel", "mw");
    /** Why {@link #objectCounts()} is not available, or {@code null} on the software device. */
    static final String NO_OBJECT_COUNTS;
    private static final MethodHandle OBJECT_COUNT;

    static {
        if (System.getProperty(NativeLibraries.LIBRARY_PATH_PROPERTY) == null
                && System.getenv(NativeLibraries.LIBRARY_PATH_ENV) == null) {
            System.setProperty(NativeLibraries.LIBRARY_PATH_PROPERTY, NativeLibraries.BUNDLED);
        }
        assertThat(NativeLibraries.loadFailure()).as("loading %s", NativeLibraries.description()).isNull();
        assertThat(VerbsAvailability.unavailabilityCause()).as("RDMA unavailability cause").isNull();
        OBJECT_COUNT = NativeLibraries.findIbverbs("softrdma_object_count")
                .map(address -> Linker.nativeLinker().downcallHandle(address,
                        FunctionDescriptor.of(JAVA_LONG, ADDRESS)))
                .orElse(null);
        NO_OBJECT_COUNTS = OBJECT_COUNT != null ? null : "device object counts exist only on the software device"
                + " (softrdma_object_count), these tests run on " + NativeLibraries.description();
    }

    private SoftwareDevice() {
    }

    /** Makes sure the libraries are loaded and a device is available (class initialisation does the work). */
    static void use() {
    }

    static boolean hasObjectCounts() {
        return OBJECT_COUNT != null;
    }

    /** {@code softrdma_object_count(kind)} for every kind. */
    static Map<String, Long> objectCounts() {
        assertThat(OBJECT_COUNT).as(NO_OBJECT_COUNTS).isNotNull();
        Map<String, Long> counts = new LinkedHashMap<>();
        try (Arena arena = Arena.ofConfined()) {
            for (String kind : KINDS) {
                counts.put(kind, (long) OBJECT_COUNT.invokeExact(arena.allocateFrom(kind)));
            }
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
        return counts;
    }
}
