package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.verbs.NativeLibraries;
import io.netty.contrib.channel.rdma.internal.verbs.VerbsAvailability;

/**
 * Tells whether the RDMA transport can be used in this JVM, like Netty's {@code Epoll} and {@code IoUring}.
 *
 * <p>By default the system's rdma-core libraries ({@code libibverbs.so.1}, {@code librdmacm.so.1}) are used. The
 * system property {@value NativeLibraries#LIBRARY_PATH_PROPERTY} (or the environment variable
 * {@value NativeLibraries#LIBRARY_PATH_ENV}) names a directory to load them from instead; the value
 * {@value NativeLibraries#BUNDLED} selects the software RDMA device shipped in this jar, which needs no RDMA
 * hardware. There is no silent fallback from one to the other. The choice is made once per class loader.
 */
public final class Rdma {
    private Rdma() {
    }

    /** Whether the RDMA libraries are loaded and report at least one device. */
    public static boolean isAvailable() {
        return VerbsAvailability.unavailabilityCause() == null;
    }

    /**
     * Throws an {@link UnsatisfiedLinkError} explaining why RDMA is unavailable, if it is.
     */
    public static void ensureAvailability() {
        Throwable cause = VerbsAvailability.unavailabilityCause();
        if (cause != null) {
            throw (Error) new UnsatisfiedLinkError("failed to load the RDMA transport: " + cause.getMessage())
                    .initCause(cause);
        }
    }

    /**
     * Why RDMA is unavailable (what is missing and what to do), or {@code null} if it is available.
     */
    public static Throwable unavailabilityCause() {
        return VerbsAvailability.unavailabilityCause();
    }

    /**
     * A report of what this JVM sees of RDMA, for people: the libraries loaded (files and versions), each device
     * and port (state, link layer, MTU, GID table with types and netdevs, from the verbs and from
     * {@code /sys/class/infiniband}), {@code RLIMIT_MEMLOCK} against what the allocator and the connections
     * register, huge pages, whether rdma_cm can bind the host's addresses, and for each problem found the fix.
     * Never throws for a missing library or device: it says so. Also {@code java -jar netty-transport-rdma.jar
     * diagnose}.
     */
    public static String diagnose() {
        return diagnose(null);
    }

    /** {@link #diagnose()}, trying to bind rdma_cm to {@code address} (e.g. the IP of an RDMA netdev) only. */
    public static String diagnose(String address) {
        return RdmaDiagnostics.report(address);
    }
}
