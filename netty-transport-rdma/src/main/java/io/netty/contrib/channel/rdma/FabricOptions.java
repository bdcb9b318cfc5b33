package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.verbs.CmId;
import io.netty.contrib.channel.rdma.internal.verbs.ConnParam;
import io.netty.contrib.channel.rdma.internal.verbs.QueuePair;

import java.net.ConnectException;

/**
 * Where the fabric's {@link RdmaChannelOption}s (traffic class, ACK timeout, retry counts, minimum RNR timer,
 * device and GID type) meet rdma_cm's connect and accept, in the order rdma-core's own tools apply them
 * ({@code rdma_set_option} on the id before the route is resolved or the request accepted, the counts in
 * {@code rdma_conn_param}), and where the result is read back. Loop thread.
 */
final class FabricOptions {
    /** One outstanding RDMA READ each way: the transport issues none. */
    private static final int READ_DEPTH = 1;

    private FabricOptions() {
    }

    /** A client's id, before {@code rdma_resolve_addr}: rdma_cm uses the TOS when it resolves the route. */
    static void beforeResolve(CmId id, RdmaChannelConfig config) {
        if (config.getTrafficClass() != 0) {
            id.setTos(config.getTrafficClass());
        }
        if (config.getAckTimeout() >= 0) {
            id.setAckTimeout(config.getAckTimeout());
        }
    }

    /** A client's id at ADDR_RESOLVED: the device rdma_cm picked by route against {@link RdmaChannelOption#DEVICE}. */
    static void checkDevice(CmId id, RdmaChannelConfig config) throws ConnectException {
        String wanted = config.getDevice();
        if (wanted.isEmpty()) {
            return;
        }
        String got = id.verbs().deviceName();
        if (!wanted.equals(got)) {
            throw new ConnectException("the route to " + id.remoteAddress() + " is on device " + got + ", not on "
                    + wanted + " (RdmaChannelOption.DEVICE): bind the channel to an address of " + wanted
                    + " (Bootstrap.localAddress) or route the peer through it");
        }
    }

    /** An accepted id, before {@code rdma_accept}, which moves the queue pair to RTR and RTS. */
    static void beforeAccept(CmId id, RdmaChannelConfig config) {
        if (config.getAckTimeout() >= 0) {
            id.setAckTimeout(config.getAckTimeout());
        }
    }

    /**
     * {@code rdma_connect}'s or {@code rdma_accept}'s parameters. rdma_cm gives both queue pairs the client's
     * retry count (the server's is ignored), and each side's RNR retry count to its peer's queue pair.
     */
    static ConnParam connParam(byte[] privateData, RdmaChannelConfig config) {
        return new ConnParam(privateData, READ_DEPTH, READ_DEPTH, config.getRetryCount(), config.getRnrRetryCount(),
                0);
    }

    /**
     * Once rdma_cm has moved {@code qp} to RTS (after {@code rdma_accept}; at ESTABLISHED on a client): rdma_cm has
     * no option for the minimum RNR timer and sets RTR itself, and RTS to RTS may still change it.
     */
    static void atRts(QueuePair qp, RdmaChannelConfig config) {
        if (config.getMinRnrTimer() >= 0) {
            qp.modifyMinRnrTimer(config.getMinRnrTimer());
        }
    }

    /** At ESTABLISHED: what the queue pair runs with. */
    static RdmaConnectionSettings established(CmId id, QueuePair qp) {
        return RdmaConnectionSettings.query(id.verbs(), qp);
    }

    /**
     * A client's {@link RdmaChannelOption#GID_TYPE} against the GID its queue pair got (known only once rdma_cm
     * has set the queue pair's address vector).
     */
    static void checkGidType(CmId id, RdmaConnectionSettings settings, RdmaChannelConfig config)
            throws ConnectException {
        String wanted = config.getGidType();
        if (!wanted.isEmpty() && !wanted.equals(settings.gidType())) {
            throw new ConnectException("the connection to " + id.remoteAddress() + " got a " + settings.gidType()
                    + " GID (GID[" + settings.gidIndex() + "] of " + settings.device() + " port " + settings.port()
                    + "), not " + wanted + " (RdmaChannelOption.GID_TYPE): rdma_cm takes the port's default, set it"
                    + " in /sys/kernel/config/rdma_cm/" + settings.device() + "/ports/" + settings.port()
                    + "/default_roce_mode");
        }
    }
}
