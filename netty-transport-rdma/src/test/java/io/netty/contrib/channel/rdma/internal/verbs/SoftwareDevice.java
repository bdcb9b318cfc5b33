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
 * Selects the bundled software RDMA device for the tests of this JVM and exposes its object counters. The
 * device is part of the build: if it is missing, the tests using it fail (never skip).
 */
final class SoftwareDevice {
    static final List<String> KINDS = List.of("context", "pd", "mr", "cq", "comp_channel", "qp", "srq", "cm_id",
            "cm_channel");
    private static final MethodHandle OBJECT_COUNT;

    static {
        if (System.getProperty(NativeLibraries.LIBRARY_PATH_PROPERTY) == null
                && System.getenv(NativeLibraries.LIBRARY_PATH_ENV) == null) {
            System.setProperty(NativeLibraries.LIBRARY_PATH_PROPERTY, NativeLibraries.BUNDLED);
        }
        assertThat(NativeLibraries.loadFailure()).as("loading %s", NativeLibraries.description()).isNull();
        assertThat(NativeLibraries.isSoftwareDevice())
                .as("the tests need the software RDMA device, but %s was loaded first in this JVM; run them with"
                        + " -D%s=bundled", NativeLibraries.description(), NativeLibraries.LIBRARY_PATH_PROPERTY)
                .isTrue();
        assertThat(VerbsAvailability.unavailabilityCause()).as("RDMA unavailability cause").isNull();
        OBJECT_COUNT = Linker.nativeLinker().downcallHandle(
                NativeLibraries.findIbverbs("softrdma_object_count").orElseThrow(),
                FunctionDescriptor.of(JAVA_LONG, ADDRESS));
    }

    private SoftwareDevice() {
    }

    /** Makes sure the software device is the one loaded (class initialisation does the work). */
    static void use() {
    }

    /** {@code softrdma_object_count(kind)} for every kind. */
    static Map<String, Long> objectCounts() {
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
