package io.netty.contrib.channel.rdma;

import io.netty.contrib.channel.rdma.internal.verbs.GidEntry;
import io.netty.contrib.channel.rdma.internal.verbs.QpAttributes;
import io.netty.contrib.channel.rdma.internal.verbs.QueuePair;
import io.netty.contrib.channel.rdma.internal.verbs.VerbsContext;

/**
 * The path and transport settings an established connection's queue pair runs with, read back from the device
 * with {@code ibv_query_qp} (and the source GID's entry with {@code ibv_query_gid_ex}) once rdma_cm has moved it
 * to RTS: what the {@link RdmaChannelOption}s of the fabric asked for, after rdma_cm's negotiation and defaults.
 * {@link RdmaChannel#connectionSettings()}; also in the JFR {@code Connect} and {@code Accept} events.
 *
 * @param device        the verbs device the connection uses
 * @param port          its port
 * @param gidIndex      the source GID's index in the port's GID table
 * @param gid           the source GID (an IPv4-mapped {@code ::ffff:a.b.c.d} or an IPv6 address on RoCE)
 * @param gidType       {@code IB}, {@code RoCE v1} or {@code RoCE v2} ({@code unknown} without
 *                      {@code ibv_query_gid_ex})
 * @param trafficClass  the GRH traffic class: on RoCE v2 the IP header's TOS byte ({@link #dscp()} is its upper
 *                      six bits)
 * @param serviceLevel  the address vector's service level: {@link RdmaChannelOption#SERVICE_LEVEL}, else on RoCE
 *                      the priority rdma_cm derived from the traffic class (the 802.1p PCP on a VLAN netdev, 0
 *                      otherwise); kernel rxe keeps none and reports 0
 * @param pathMtu       bytes: the path's, or {@link RdmaChannelOption#PATH_MTU}'s cap when it is lower
 * @param ackTimeout    the local ACK timeout code ({@link #ackTimeoutMicros()})
 * @param retryCount    transport retries after an ACK timeout
 * @param rnrRetryCount retries after an RNR NAK, 7 = infinite
 * @param minRnrTimer   the RNR NAK timer code this side sends as responder ({@link #minRnrTimerMillis()})
 */
public record RdmaConnectionSettings(String device, int port, int gidIndex, String gid, String gidType,
                                     int trafficClass, int serviceLevel, int pathMtu, int ackTimeout, int retryCount,
                                     int rnrRetryCount, int minRnrTimer) {
    /** IBA table 45 (and {@code man ibv_modify_qp}): the RNR NAK timer in milliseconds per code. */
    private static final double[] RNR_TIMER_MILLIS = {
        655.36, 0.01, 0.02, 0.03, 0.04, 0.06, 0.08, 0.12, 0.16, 0.24, 0.32, 0.48, 0.64, 0.96, 1.28, 1.92, 2.56, 3.84,
        5.12, 7.68, 10.24, 15.36, 20.48, 30.72, 40.96, 61.44, 81.92, 122.88, 163.84, 245.76, 327.68, 491.52};

    /** Reads the settings of {@code qp}, connected on {@code context}. */
    static RdmaConnectionSettings query(VerbsContext context, QueuePair qp) {
        QpAttributes a = qp.queryAttributes();
        String gid = "-";
        String type = "unknown";
        try {
            if (GidEntry.supported()) {
                GidEntry e = GidEntry.query(context, a.portNum(), a.sgidIndex());
                if (e != null) {
                    gid = formatGid(e.gid());
                    type = GidEntry.typeName(e.type());
                }
            } else {
                gid = formatGid(context.queryGid(a.portNum(), a.sgidIndex()));
            }
        } catch (RuntimeException e) {
            // The settings stand without the GID's entry; a device that cannot say gets "unknown".
            type = "unknown (" + e.getMessage() + ")";
        }
        return new RdmaConnectionSettings(context.deviceName(), a.portNum(), a.sgidIndex(), gid, type,
                a.trafficClass(), a.serviceLevel(), QpAttributes.mtuBytes(a.pathMtu()), a.ackTimeout(),
                a.retryCount(), a.rnrRetry(), a.minRnrTimer());
    }

    /** The DSCP of the traffic class (its upper six bits). */
    public int dscp() {
        return trafficClass >>> 2;
    }

    /** The ACK timeout in microseconds, 4.096 &times; 2<sup>ackTimeout</sup>; infinite for code 0. */
    public double ackTimeoutMicros() {
        return ackTimeout == 0 ? Double.POSITIVE_INFINITY : 4.096 * (1L << ackTimeout);
    }

    /** The RNR NAK timer in milliseconds. */
    public double minRnrTimerMillis() {
        return RNR_TIMER_MILLIS[minRnrTimer & 31];
    }

    private static String formatGid(byte[] gid) {
        StringBuilder b = new StringBuilder(39);
        for (int i = 0; i < 16; i += 2) {
            if (i > 0) {
                b.append(':');
            }
            b.append(String.format("%02x%02x", gid[i], gid[i + 1]));
        }
        return b.toString();
    }

    @Override
    public String toString() {
        return device + " port " + port + ", GID[" + gidIndex + "] " + gid + " " + gidType + ", traffic class "
                + trafficClass + " (DSCP " + dscp() + "), SL " + serviceLevel + ", path MTU " + pathMtu
                + ", ACK timeout " + ackTimeout + " (" + (ackTimeout == 0 ? "infinite" : String.format("%.1f us",
                ackTimeoutMicros())) + "), retry count " + retryCount + ", RNR retry count " + rnrRetryCount
                + (rnrRetryCount == 7 ? " (infinite)" : "") + ", min RNR timer " + minRnrTimer + " ("
                + minRnrTimerMillis() + " ms)";
    }
}
