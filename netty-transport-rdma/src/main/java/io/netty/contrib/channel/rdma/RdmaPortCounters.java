package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.verbs.PortCounters;
import io.netty.contrib.channel.rdma.internal.verbs.VerbsContext;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The counters of one port of an RDMA device, as the device keeps them: retransmissions, sequence errors, RNR
 * NAKs, packets and bytes. On a kernel device they are {@code /sys/class/infiniband/<device>/ports/<port>/counters}
 * (the InfiniBand port counters, e.g. {@code counters/port_xmit_data}) and {@code hw_counters} (the driver's, e.g.
 * kernel rxe's {@code hw_counters/rcvd_rnr_err}, {@code hw_counters/retry_exceeded_err},
 * {@code hw_counters/completer_retry_err}); the software device keeps those of rxe's {@code hw_counters} it can
 * have under the same names (the others read 0). Values are cumulative since the device (or the software device's
 * process) started; each read goes to the device. For metrics scrapes and diagnostics, not the data path.
 */
public final class RdmaPortCounters {
    private final String device;
    private final int port;
    private final Set<String> names;

    private RdmaPortCounters(String device, int port, Set<String> names) {
        this.device = device;
        this.port = port;
        this.names = names;
    }

    /** Every port of every device rdma_cm reports (the devices the transport's channels use). */
    public static List<RdmaPortCounters> list() {
        Rdma.ensureAvailability();
        List<RdmaPortCounters> ports = new ArrayList<>();
        for (VerbsContext context : VerbsContext.cmDevices()) {
            int count = context.queryDevice().physPortCnt();
            for (int port = 1; port <= count; port++) {
                ports.add(of(context.deviceName(), port));
            }
        }
        return ports;
    }

    /** The counters of {@code device} port {@code port} (those that exist now). */
    static RdmaPortCounters of(String device, int port) {
        return new RdmaPortCounters(device, port, Set.copyOf(PortCounters.read(device, port).keySet()));
    }

    public String device() {
        return device;
    }

    public int port() {
        return port;
    }

    /** The counters of the port, each {@code group/name} ({@code counters/...} or {@code hw_counters/...}). */
    public Set<String> names() {
        return names;
    }

    /** Counter {@code name} (one of {@link #names()}) now; -1 if it cannot be read. */
    public long value(String name) {
        return PortCounters.read(device, port, name);
    }

    /** Every counter of the port with its value now. */
    public Map<String, Long> values() {
        return PortCounters.read(device, port);
    }

    @Override
    public String toString() {
        return "RdmaPortCounters(" + device + " port " + port + ": " + values() + ')';
    }
}
