package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.verbs.CmId;
import io.netty.contrib.channel.rdma.internal.verbs.IbvEventType;
import io.netty.contrib.channel.rdma.internal.verbs.VerbsContext;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;

import java.io.IOException;
import java.net.ConnectException;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The ports of the process's devices that are down: from the {@code IBV_EVENT_PORT_ERR} {@link DeviceEvents} took
 * to the {@code IBV_EVENT_PORT_ACTIVE} that follows. A connection there fails at once while its port is down,
 * rather than after rdma_cm's timeouts (kernel rxe still resolves an address of its own host over a netdev that is
 * down; the requests then go nowhere). The devices of this transport have one port each (rdma_cm ids are on port
 * 1 of theirs), so a connection is refused while any port of its device is down. Any thread.
 */
final class PortStates {
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(PortStates.class);
    /** {@code IBV_PORT_ACTIVE} of {@code enum ibv_port_state}. */
    private static final int IBV_PORT_ACTIVE = 4;
    /** What went down, by device name, then port: the cause a connection there is given. */
    private static final Map<String, Map<Integer, String>> DOWN = new ConcurrentHashMap<>();

    private PortStates() {
    }

    /** {@code port} of {@code device} went down; returns the cause that names it. */
    static String down(String device, int port) {
        String cause = "port " + port + " of " + device + " went down (" + IbvEventType.name(IbvEventType.PORT_ERR)
                + ")";
        DOWN.computeIfAbsent(device, d -> new ConcurrentHashMap<>()).put(port, cause);
        return cause;
    }

    /** {@code device} was removed: none of its ports is down any more (a device of that name is a new one). */
    static void forget(String device) {
        DOWN.remove(device);
    }

    /** {@code port} of {@code device} is active again. */
    static void up(String device, int port) {
        DOWN.computeIfPresent(device, (d, ports) -> {
            ports.remove(port);
            return ports.isEmpty() ? null : ports;
        });
    }

    /** Why {@code device} cannot carry a connection now, or {@code null} if all its ports are up. */
    static String downCause(String device) {
        Map<Integer, String> ports = DOWN.get(device);
        if (ports == null) {
            return null;
        }
        for (String cause : ports.values()) {
            return cause;
        }
        return null;
    }

    /**
     * A work request of a connection on {@code id} that failed with {@code failure}: when the connection's port is
     * down, the port is the cause, named (kernel rxe fails the sends it cannot transmit at once, LOC_QP_OP_ERR, which
     * may reach the loop before the port's event does; so the port's state is asked as well). Else
     * {@code failure} itself.
     */
    static IOException explain(CmId id, int port, IOException failure) {
        String cause = downCause(id, port);
        if (cause == null) {
            return failure;
        }
        IOException named = new IOException(cause + ": " + failure.getMessage(), failure);
        named.setStackTrace(new StackTraceElement[0]);
        return named;
    }

    /**
     * Why the connection on {@code id} (on {@code port} of its device) cannot go on: a port of its device that is
     * down, as its event said or, before the event has come, as the port's state says; {@code null} if it is up
     * (or its state cannot be asked).
     */
    static String downCause(CmId id, int port) {
        if (id == null) {
            return null;
        }
        String device = id.verbs().deviceName();
        String cause = downCause(device);
        if (cause != null) {
            return cause;
        }
        try {
            if (id.verbs().queryPort(port).state() != IBV_PORT_ACTIVE) {
                return "port " + port + " of " + device + " is down (" + IbvEventType.name(IbvEventType.PORT_ERR)
                        + " follows)";
            }
        } catch (RuntimeException e) {
            return null;
        }
        return null;
    }

    /**
     * Whether rdma_cm must send nothing for {@code id} now: a port of its device is down, as its event said (unless
     * its state is active again) or, before the event has come, as the state of the id's port says. False when the
     * id is not bound to a device or its device cannot be asked (a removed one). {@link ParkedCmIds}.
     */
    static boolean isDown(CmId id) {
        try {
            if (id.verbsAddress() == 0) {
                return false;
            }
            VerbsContext verbs = id.verbs();
            refresh(verbs);
            if (downCause(verbs.deviceName()) != null) {
                return true;
            }
            return verbs.queryPort(Math.max(1, id.portNum())).state() != IBV_PORT_ACTIVE;
        } catch (RuntimeException e) {
            return false;
        }
    }

    /** Ports of {@code verbs}' device recorded as down whose state is active again count as up from now on. */
    private static void refresh(VerbsContext verbs) {
        String device = verbs.deviceName();
        Map<Integer, String> ports = DOWN.get(device);
        if (ports == null) {
            return;
        }
        for (Integer port : ports.keySet()) {
            try {
                if (verbs.queryPort(port).state() == IBV_PORT_ACTIVE) {
                    up(device, port);
                    logger.info("port {} of {} is active again (no {} came): connections there go through", port,
                            device, IbvEventType.name(IbvEventType.PORT_ACTIVE));
                }
            } catch (RuntimeException e) {
                logger.debug("ibv_query_port of {} failed", device, e);
            }
        }
    }

    /** The ports down, as "; port 1 of softrdma0 went down (...)" for a failed connect's message; else "". */
    static String describeDown() {
        StringBuilder b = new StringBuilder();
        for (Map<Integer, String> ports : DOWN.values()) {
            for (String cause : ports.values()) {
                b.append("; ").append(cause);
            }
        }
        return b.toString();
    }

    /**
     * Fails a connection whose route ({@code id}, its address resolved) is on a device with a port down. A port
     * recorded as down whose state is active again counts as up from now on: its {@code IBV_EVENT_PORT_ACTIVE} may
     * never come (kernel rxe 6.1 sent none for the far end of a veth pair whose carrier came back), and a port that
     * stayed down for the process would refuse every connection there until it exits.
     */
    static void checkUp(CmId id) throws ConnectException {
        VerbsContext verbs = id.verbs();
        String device = verbs.deviceName();
        refresh(verbs);
        String cause = downCause(device);
        if (cause != null) {
            throw new ConnectException("cannot connect to " + id.remoteAddress() + ": " + cause
                    + "; connections on " + device + " resume once it is active again (IBV_EVENT_PORT_ACTIVE)");
        }
    }
}
