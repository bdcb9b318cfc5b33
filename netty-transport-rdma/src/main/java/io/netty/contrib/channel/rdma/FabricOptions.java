package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.protocol.ConnectParameters;
import io.netty.contrib.channel.rdma.internal.protocol.ProtocolException;
import io.netty.contrib.channel.rdma.internal.protocol.RejectReason;
import io.netty.contrib.channel.rdma.internal.verbs.CmId;
import io.netty.contrib.channel.rdma.internal.verbs.ConnParam;
import io.netty.contrib.channel.rdma.internal.verbs.IbvQpState;
import io.netty.contrib.channel.rdma.internal.verbs.QpAttributes;
import io.netty.contrib.channel.rdma.internal.verbs.QueuePair;

import java.net.ConnectException;

/**
 * Where the fabric's {@link RdmaChannelOption}s (traffic class, ACK timeout, retry counts, minimum RNR timer,
 * device and GID type, service level and path MTU) meet rdma_cm's connect and accept, in the order rdma-core's own
 * tools apply them ({@code rdma_set_option} on the id before the route is resolved or the request accepted, the
 * counts in {@code rdma_conn_param}; for an SL or an MTU cap a queue pair of the transport's own, moved to RTS with
 * {@code rdma_init_qp_attr} and {@code ibv_modify_qp} as rping's {@code -q} mode does), and where the result is
 * read back. Loop thread.
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
                0, false);
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

    /**
     * Whether an accepted connection's queue pair is the transport's own: this side sets an SL or an MTU cap, or
     * the client asks for a cap (which the server's queue pair must follow).
     */
    static boolean ownQueuePair(RdmaChannelConfig config, ConnectParameters client) {
        return config.drivesQueuePair() || client.pathMtu() != 0;
    }

    /**
     * The path MTU ({@code enum ibv_mtu}) of an accepted connection's own queue pair: rdma_cm's, capped by this
     * side's {@link RdmaChannelOption#PATH_MTU} and the client's cap. A cap the client cannot follow (its queue
     * pair is rdma_cm's, at rdma_cm's MTU) is refused: two MTUs on one connection break every message longer than
     * the smaller (IBA C9-92).
     */
    static int acceptPathMtu(CmId id, RdmaChannelConfig config, ConnectParameters client) {
        int path = id.rtrPathMtu();
        int mtu = Math.min(path, cap(config));
        if (client.pathMtu() != 0) {
            mtu = Math.min(mtu, client.pathMtu());
        }
        if (mtu < path && !client.ownQueuePair()) {
            throw new ProtocolException("the client's queue pair runs at rdma_cm's path MTU of "
                    + QpAttributes.mtuBytes(path) + " bytes, above this side's PATH_MTU cap of "
                    + QpAttributes.mtuBytes(mtu) + ": the client must set RdmaChannelOption.PATH_MTU too",
                    RejectReason.REASON_PATH_MTU);
        }
        return mtu;
    }

    /**
     * The path MTU of a client's own queue pair at CONNECT_RESPONSE: the server's (the two must match), which is
     * never above rdma_cm's capped by this side's {@link RdmaChannelOption#PATH_MTU}; a server that announces none
     * drove its queue pair with rdma_cm's, as this side then does.
     */
    static int connectPathMtu(CmId id, RdmaChannelConfig config, ConnectParameters server) throws ConnectException {
        int mtu = Math.min(id.rtrPathMtu(), cap(config));
        if (server.pathMtu() == 0) {
            return mtu;
        }
        if (server.pathMtu() > mtu) {
            throw new ConnectException("the server's queue pair runs at a path MTU of "
                    + QpAttributes.mtuBytes(server.pathMtu()) + " bytes, above this side's "
                    + QpAttributes.mtuBytes(mtu) + " (PATH_MTU or the path's): " + id.remoteAddress());
        }
        return server.pathMtu();
    }

    /** A client whose queue pair is rdma_cm's: the server's must run at the same path MTU. */
    static void checkPathMtu(CmId id, RdmaConnectionSettings settings, ConnectParameters server)
            throws ConnectException {
        int theirs = QpAttributes.mtuBytes(server.pathMtu());
        if (theirs != 0 && theirs != settings.pathMtu()) {
            throw new ConnectException("the server's queue pair runs at a path MTU of " + theirs + " bytes, this"
                    + " side's at " + settings.pathMtu() + ": set RdmaChannelOption.PATH_MTU to " + theirs
                    + " here: " + id.remoteAddress());
        }
    }

    /** This side's cap as an {@code enum ibv_mtu}, 5 (4096) without one. */
    private static int cap(RdmaChannelConfig config) {
        return config.getPathMtu() == 0 ? 5 : QpAttributes.mtuEnum(config.getPathMtu());
    }

    /**
     * Moves a queue pair of the transport's own through INIT, RTR and RTS with rdma_cm's attributes, the path MTU
     * {@code pathMtu} and this side's {@link RdmaChannelOption#SERVICE_LEVEL}: a server before {@code rdma_accept},
     * a client at CONNECT_RESPONSE (then {@code rdma_establish}). A failure names the step.
     */
    static void driveToRts(CmId id, QueuePair qp, int pathMtu, RdmaChannelConfig config) throws ConnectException {
        int[] states = {IbvQpState.INIT, IbvQpState.RTR, IbvQpState.RTS};
        for (int state : states) {
            try {
                qp.modifyFromCm(id, state, READ_DEPTH, pathMtu, config.getServiceLevel());
            } catch (RuntimeException e) {
                ConnectException c = new ConnectException("could not move the queue pair to "
                        + IbvQpState.name(state) + " (the transport drives it for SERVICE_LEVEL and PATH_MTU): "
                        + e.getMessage());
                c.initCause(e);
                throw c;
            }
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
