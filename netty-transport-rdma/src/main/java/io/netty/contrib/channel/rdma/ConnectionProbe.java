package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.verbs.CmEvent;
import io.netty.contrib.channel.rdma.internal.verbs.CmEventChannel;
import io.netty.contrib.channel.rdma.internal.verbs.CmEventType;
import io.netty.contrib.channel.rdma.internal.verbs.CmId;
import io.netty.contrib.channel.rdma.internal.verbs.CompletionQueue;
import io.netty.contrib.channel.rdma.internal.verbs.ConnParam;
import io.netty.contrib.channel.rdma.internal.verbs.IbvQpState;
import io.netty.contrib.channel.rdma.internal.verbs.ProtectionDomain;
import io.netty.contrib.channel.rdma.internal.verbs.QpAttributes;
import io.netty.contrib.channel.rdma.internal.verbs.QpInitAttributes;
import io.netty.contrib.channel.rdma.internal.verbs.QueuePair;
import io.netty.contrib.channel.rdma.internal.verbs.VerbsContext;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayDeque;
import java.util.Deque;

/**
 * The connection section of {@code diagnose}: one rdma_cm connection from {@code address} to itself, made with
 * the verbs alone (no Netty class, so the jar runs it) in the order the transport makes its own, with the
 * settings of {@link Settings}, then read back on both ends as {@link RdmaChannel#connectionSettings()} does. It
 * shows what this host's rdma_cm and device make of the fabric options: the device, port and GID chosen, and the
 * negotiated counts and timers.
 */
final class ConnectionProbe {
    private static final int TIMEOUT_MILLIS = 5000;

    /**
     * What the probe asks for, as the channel options do (-1: rdma_cm's choice), from system properties
     * {@code io.netty.contrib.rdma.diagnose.trafficClass}, {@code .ackTimeout}, {@code .retryCount},
     * {@code .rnrRetryCount}, {@code .minRnrTimer}, {@code .serviceLevel}, {@code .pathMtu} (bytes, 0 for none);
     * the transport's defaults otherwise. With a service level or an MTU cap both queue pairs are the probe's own,
     * moved to RTS as the transport moves its own ({@link FabricOptions#driveToRts}).
     */
    record Settings(int trafficClass, int ackTimeout, int retryCount, int rnrRetryCount, int minRnrTimer,
                    int serviceLevel, int pathMtu) {
        static Settings fromSystemProperties() {
            int pathMtu = property("pathMtu", RdmaChannelConfig.DEFAULT_PATH_MTU, 0, 4096);
            if (pathMtu != 0 && QpAttributes.mtuEnum(pathMtu) == 0) {
                throw new IllegalArgumentException("io.netty.contrib.rdma.diagnose.pathMtu: " + pathMtu
                        + " (expected: 256, 512, 1024, 2048 or 4096, or 0 for the path's MTU)");
            }
            return new Settings(property("trafficClass", 0, 0, 255),
                    property("ackTimeout", RdmaChannelConfig.DEFAULT_ACK_TIMEOUT, -1, 31),
                    property("retryCount", RdmaChannelConfig.DEFAULT_RETRY_COUNT, 0, 7),
                    property("rnrRetryCount", RdmaChannelConfig.DEFAULT_RNR_RETRY_COUNT, 0, 7),
                    property("minRnrTimer", RdmaChannelConfig.DEFAULT_MIN_RNR_TIMER, -1, 31),
                    property("serviceLevel", RdmaChannelConfig.DEFAULT_SERVICE_LEVEL, -1, 15), pathMtu);
        }

        /** As {@link RdmaChannelConfig#drivesQueuePair()}. */
        boolean ownQueuePairs() {
            return serviceLevel >= 0 || pathMtu != 0;
        }

        /** The MTU cap as {@code enum ibv_mtu}, 5 (4096) without one. */
        int mtuCap() {
            return pathMtu == 0 ? 5 : QpAttributes.mtuEnum(pathMtu);
        }

        private static int property(String name, int dflt, int min, int max) {
            String key = "io.netty.contrib.rdma.diagnose." + name;
            String value = System.getProperty(key);
            if (value == null || value.isBlank()) {
                return dflt;
            }
            int v;
            try {
                v = Integer.parseInt(value.trim());
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException(key + ": \"" + value + "\" (expected: an integer " + min + "-"
                        + max + ")");
            }
            if (v < min || v > max) {
                throw new IllegalArgumentException(key + ": " + v + " (expected: " + min + "-" + max + ")");
            }
            return v;
        }
    }

    /** The client's and the server's settings, as each queue pair reports them. */
    record Result(RdmaConnectionSettings client, RdmaConnectionSettings server) {
    }

    private ConnectionProbe() {
    }

    static Result connect(InetAddress address, Settings s) {
        Deque<AutoCloseable> opened = new ArrayDeque<>();
        try {
            CmEventChannel serverChannel = open(opened, CmEventChannel.create());
            CmEventChannel clientChannel = open(opened, CmEventChannel.create());
            CmId listener = open(opened, serverChannel.createId());
            listener.bind(new InetSocketAddress(address, 0));
            listener.listen(1);
            CmId client = open(opened, clientChannel.createId());
            if (s.trafficClass() != 0) {
                client.setTos(s.trafficClass());
            }
            if (s.ackTimeout() >= 0) {
                client.setAckTimeout(s.ackTimeout());
            }
            client.resolveAddr(null, new InetSocketAddress(address, listener.localAddress().getPort()),
                    TIMEOUT_MILLIS);
            expect(clientChannel, CmEventType.ADDR_RESOLVED).ack();
            client.resolveRoute(TIMEOUT_MILLIS);
            expect(clientChannel, CmEventType.ROUTE_RESOLVED).ack();
            boolean own = s.ownQueuePairs();
            QueuePair clientQp = queuePair(opened, client, own);
            ConnParam param = new ConnParam(null, 1, 1, s.retryCount(), s.rnrRetryCount(), 0, false);
            client.connect(own ? param.withQp(clientQp.qpNum(), false) : param);

            CmEvent request = expect(serverChannel, CmEventType.CONNECT_REQUEST);
            CmId incoming = open(opened, request.id());
            request.ack();
            QueuePair serverQp = queuePair(opened, incoming, own);
            if (s.ackTimeout() >= 0) {
                incoming.setAckTimeout(s.ackTimeout());
            }
            // one MTU on both ends (IBA C9-92): the server's, which the client then takes
            int mtu = Math.min(incoming.rtrPathMtu(), s.mtuCap());
            if (own) {
                toRts(incoming, serverQp, mtu, s.serviceLevel());
            }
            incoming.accept(own ? param.withQp(serverQp.qpNum(), false) : param);
            if (s.minRnrTimer() >= 0) {
                serverQp.modifyMinRnrTimer(s.minRnrTimer());
            }
            if (own) {
                expect(clientChannel, CmEventType.CONNECT_RESPONSE).ack();
                toRts(client, clientQp, mtu, s.serviceLevel());
                client.establish();
            } else {
                expect(clientChannel, CmEventType.ESTABLISHED).ack();
            }
            if (s.minRnrTimer() >= 0) {
                clientQp.modifyMinRnrTimer(s.minRnrTimer());
            }
            expect(serverChannel, CmEventType.ESTABLISHED).ack();
            Result result = new Result(RdmaConnectionSettings.query(client.verbs(), clientQp),
                    RdmaConnectionSettings.query(incoming.verbs(), serverQp));
            client.disconnect();
            return result;
        } finally {
            while (!opened.isEmpty()) {
                try {
                    opened.pop().close();
                } catch (Exception e) {
                    // closing what a failed probe left; the probe's own failure is what the report shows
                }
            }
        }
    }

    /** {@code own}: with {@code ibv_create_qp}, for {@link #toRts}; else rdma_cm's. */
    private static QueuePair queuePair(Deque<AutoCloseable> opened, CmId id, boolean own) {
        VerbsContext context = id.verbs();
        ProtectionDomain pd = open(opened, context.allocPd());
        CompletionQueue cq = open(opened, context.createCq(4, null, 0));
        QpInitAttributes init = new QpInitAttributes(cq, cq, null, 2, 2, 1, 1, 0, false);
        return open(opened, own ? pd.createQp(init) : id.createQp(pd, init));
    }

    private static void toRts(CmId id, QueuePair qp, int pathMtu, int serviceLevel) {
        for (int state : new int[] {IbvQpState.INIT, IbvQpState.RTR, IbvQpState.RTS}) {
            qp.modifyFromCm(id, state, 1, pathMtu, serviceLevel);
        }
    }

    private static <T extends AutoCloseable> T open(Deque<AutoCloseable> opened, T object) {
        opened.push(object);
        return object;
    }

    private static CmEvent expect(CmEventChannel channel, int type) {
        if (!channel.await(TIMEOUT_MILLIS)) {
            throw new IllegalStateException("no rdma_cm event within " + TIMEOUT_MILLIS + " ms (waiting for "
                    + CmEventType.name(type) + ")");
        }
        CmEvent event = channel.getEvent();
        if (event.type() != type) {
            String got = event.typeString() + " (status " + event.status() + ")";
            event.ack();
            throw new IllegalStateException("rdma_cm reported " + got + " instead of " + CmEventType.name(type));
        }
        return event;
    }
}
