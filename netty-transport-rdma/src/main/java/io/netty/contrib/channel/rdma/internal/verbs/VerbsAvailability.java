package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.invoke.MethodHandles;
import java.util.List;

/**
 * Whether RDMA can be used in this JVM, decided once: the libraries load, export what the bindings need, and
 * report at least one device. The cause says what is missing and what to do.
 */
public final class VerbsAvailability {
    private static final Throwable UNAVAILABILITY_CAUSE = compute();

    private VerbsAvailability() {
    }

    /** Why RDMA is unavailable, or {@code null} if it is available. */
    public static Throwable unavailabilityCause() {
        return UNAVAILABILITY_CAUSE;
    }

    private static Throwable compute() {
        try {
            Throwable loadFailure = NativeLibraries.loadFailure();
            if (loadFailure != null) {
                return loadFailure;
            }
            // Initialise the handle holders so that every missing symbol is recorded.
            MethodHandles.lookup().ensureInitialized(LibIbverbs.class);
            MethodHandles.lookup().ensureInitialized(LibRdmacm.class);
            List<String> missing = Downcalls.missingRequired();
            if (!missing.isEmpty()) {
                return new UnsupportedOperationException(NativeLibraries.description() + " lack(s) " + missing
                        + "; use rdma-core 28 or newer");
            }
            try {
                if (VerbsDevice.list().isEmpty()) {
                    return new UnsupportedOperationException("no RDMA device: ibv_get_device_list found none in "
                            + NativeLibraries.description() + " (load a NIC driver, or add a software device with"
                            + " `rdma link add rxe0 type rxe netdev eth0`)" + bundledHint());
                }
            } catch (VerbsException e) {
                String reason = e.errno() == Errno.ENOSYS ? " (this kernel has no RDMA support)"
                        : e.errno() == Errno.EPERM || e.errno() == Errno.EACCES
                        ? " (no permission to open /dev/infiniband)" : "";
                return new UnsupportedOperationException("no RDMA device: ibv_get_device_list failed with "
                        + Errno.name(e.errno()) + reason + bundledHint(), e);
            }
            return null;
        } catch (Throwable t) {
            return t;
        }
    }

    private static String bundledHint() {
        return NativeLibraries.source() == NativeLibraries.Source.BUNDLED ? ""
                : "; to run on the bundled software device set -D" + NativeLibraries.LIBRARY_PATH_PROPERTY + "="
                + NativeLibraries.BUNDLED;
    }
}
