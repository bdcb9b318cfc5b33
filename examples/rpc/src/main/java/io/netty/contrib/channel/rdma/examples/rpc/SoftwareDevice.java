package io.netty.contrib.channel.rdma.examples.rpc;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.stream.Stream;

/**
 * Chooses the bundled software RDMA device when this machine has no RDMA device, before the transport loads
 * any native library, and says so.
 */
final class SoftwareDevice {
    static final String LIBRARY_PATH = "io.netty.contrib.rdma.libraryPath";

    private SoftwareDevice() {
    }

    static void selectIfNoHardware() {
        if (System.getProperty(LIBRARY_PATH) != null || System.getenv("NETTY_RDMA_LIBRARY_PATH") != null) {
            return;
        }
        Path devices = Path.of("/sys/class/infiniband");
        boolean hardware = false;
        if (Files.isDirectory(devices)) {
            try (Stream<Path> list = Files.list(devices)) {
                hardware = list.findAny().isPresent();
            } catch (IOException ignored) {
                // unreadable: treat as no device
            }
        }
        if (!hardware) {
            System.setProperty(LIBRARY_PATH, "bundled");
            System.err.println("No RDMA device on this machine (/sys/class/infiniband is empty): running on the "
                    + "bundled software RDMA device (-D" + LIBRARY_PATH + "=bundled).");
        }
    }
}
