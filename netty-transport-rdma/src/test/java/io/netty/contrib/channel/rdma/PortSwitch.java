package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.verbs.NativeLibraries;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Takes a device's port down and up: the software device's {@code softrdma_set_port_state}, or on kernel rxe the
 * netdev under it ({@code ip link set <netdev> down}, the netdev named by {@code RDMA_TEST_NETDEV}; root only).
 */
final class PortSwitch {
    static final String NETDEV_ENV = "RDMA_TEST_NETDEV";

    private PortSwitch() {
    }

    static boolean available() {
        return softwareHook().isPresent() || System.getenv(NETDEV_ENV) != null;
    }

    /** Skips the calling test where neither way is open. */
    static void assumeAvailable() {
        assumeTrue(available(),
                () -> "taking a port down needs the software device (softrdma_set_port_state) or, on kernel rxe, "
                        + NETDEV_ENV + " naming the rxe device's netdev; this test runs on "
                        + NativeLibraries.description());
    }

    static void set(String device, boolean up) {
        Optional<MemorySegment> hook = softwareHook();
        if (hook.isPresent()) {
            MethodHandle set = Linker.nativeLinker().downcallHandle(hook.get(),
                    FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT));
            try (Arena arena = Arena.ofConfined()) {
                assertThat((int) set.invokeExact(arena.allocateFrom(device), 1, up ? 1 : 0))
                        .as("softrdma_set_port_state(%s, 1, %s)", device, up).isZero();
            } catch (Throwable t) {
                throw new AssertionError(t);
            }
            return;
        }
        String netdev = System.getenv(NETDEV_ENV);
        try {
            Process p = new ProcessBuilder("ip", "link", "set", netdev, up ? "up" : "down").inheritIO().start();
            assertThat(p.waitFor(30, TimeUnit.SECONDS)).as("ip link set %s finished", netdev).isTrue();
            assertThat(p.exitValue()).as("ip link set %s %s", netdev, up ? "up" : "down").isZero();
        } catch (IOException e) {
            throw new AssertionError("ip link set " + netdev + " failed", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
    }

    private static Optional<MemorySegment> softwareHook() {
        return NativeLibraries.isSoftwareDevice() ? NativeLibraries.findIbverbs("softrdma_set_port_state")
                : Optional.empty();
    }
}
