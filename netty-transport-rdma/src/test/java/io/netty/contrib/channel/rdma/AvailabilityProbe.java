package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.verbs.NativeLibraries;

/** Run in a fresh JVM by {@link RdmaAvailabilityTest}: prints what {@link Rdma} decided. */
public final class AvailabilityProbe {
    private AvailabilityProbe() {
    }

    public static void main(String[] args) {
        Throwable cause = Rdma.unavailabilityCause();
        System.out.println("available=" + Rdma.isAvailable());
        System.out.println("source=" + NativeLibraries.source());
        System.out.println("cause=" + (cause == null ? "" : cause.getMessage()));
        try {
            Rdma.ensureAvailability();
            System.out.println("ensureAvailability=ok");
        } catch (UnsatisfiedLinkError e) {
            System.out.println("ensureAvailability=" + e.getMessage());
        }
    }
}
