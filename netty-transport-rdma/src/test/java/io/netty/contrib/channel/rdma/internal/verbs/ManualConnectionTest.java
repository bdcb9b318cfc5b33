package io.netty.contrib.channel.rdma.internal.verbs;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.util.List;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Device queries and a connection made by hand (no rdma_cm): two RC QPs on one context moved through
 * INIT/RTR/RTS with each other's QP number and the port's GID; the receiver uses a shared receive queue and a
 * completion channel.
 */
@ExtendWith(SoftwareDeviceExtension.class)
class ManualConnectionTest {
    private static final int PORT = 1;

    @Test
    void devicesPortsAndGidsAreQueried() {
        List<VerbsDevice> devices = VerbsDevice.list();
        assertThat(devices).isNotEmpty();
        try (VerbsContext context = VerbsContext.open(devices.getFirst().name())) {
            assertThat(context.deviceName()).isEqualTo(devices.getFirst().name());
            DeviceAttributes device = context.queryDevice();
            assertThat(device.physPortCnt()).isPositive();
            assertThat(device.maxQp()).isPositive();
            assertThat(device.maxQpWr()).isPositive();
            assertThat(device.maxSge()).isPositive();
            assertThat(device.maxCqe()).isPositive();
            assertThat(device.nodeGuid()).isEqualTo(devices.getFirst().guid());
            PortAttributes port = context.queryPort(PORT);
            assertThat(port.state()).isEqualTo(PortAttributes.STATE_ACTIVE);
            assertThat(port.activeMtu()).isBetween(1, 5);
            assertThat(port.gidTblLen()).isPositive();
            assertThat(context.queryGid(PORT, 0)).hasSize(16);
            assertThat(context.numCompVectors()).isPositive();
        }
    }

    @Test
    void queuePairsConnectedByHandExchangeMessagesThroughASharedReceiveQueue() {
        try (VerbsContext context = VerbsContext.openFirst();
             Arena arena = Arena.ofShared();
             WorkCompletions wcs = new WorkCompletions(8);
             SendWorkRequests sends = new SendWorkRequests(4, 1);
             RecvWorkRequests recvs = new RecvWorkRequests(4, 1)) {
            ProtectionDomain pd = context.allocPd();
            CompletionChannel channel = context.createCompletionChannel();
            CompletionQueue sendCq = context.createCq(8, null, 0);
            CompletionQueue recvCq = context.createCq(8, channel, 0);
            SharedReceiveQueue srq = pd.createSrq(8, 1, 0);
            QueuePair sender = pd.createQp(new QpInitAttributes(sendCq, sendCq, null, 4, 4, 1, 1, 0, false));
            QueuePair receiver = pd.createQp(new QpInitAttributes(sendCq, recvCq, srq, 4, 0, 1, 0, 0, false));
            MemorySegment buffer = arena.allocate(8192, 4096);
            MemoryRegion mr = pd.registerMemory(buffer, IbvAccessFlags.LOCAL_WRITE);
            byte[] gid = context.queryGid(PORT, 0);
            int mtu = context.queryPort(PORT).activeMtu();

            connect(sender, receiver.qpNum(), gid, mtu);
            connect(receiver, sender.qpNum(), gid, mtu);
            assertThat(sender.queryState()).isEqualTo(IbvQpState.RTS);
            assertThat(receiver.queryState()).isEqualTo(IbvQpState.RTS);

            for (int i = 0; i < 2; i++) {
                recvs.set(i, 40 + i, mr, 4096 + i * 1024L, 1024);
            }
            srq.postRecv(recvs, 0, 2);
            recvCq.reqNotify(false);

            byte[] message = "through the SRQ".getBytes(StandardCharsets.US_ASCII);
            MemorySegment.copy(message, 0, buffer, JAVA_BYTE, 0, message.length);
            sends.set(0, 1, IbvWrOpcode.SEND, IbvSendFlags.SIGNALED).sge(0, 0, mr, 0, message.length);
            sender.postSend(sends, 0, 1);

            assertThat(channel.await(10_000)).as("completion event").isTrue();
            assertThat(channel.getCqEvent()).isSameAs(recvCq);
            assertThat(recvCq.unackedEvents()).isEqualTo(1);
            recvCq.ackEvents(1);
            recvCq.reqNotify(false);
            assertThat(recvCq.poll(wcs)).isEqualTo(1);
            assertThat(wcs.status(0)).as(wcs.toString(0)).isEqualTo(IbvWcStatus.SUCCESS);
            assertThat(wcs.wrId(0)).isEqualTo(40);
            assertThat(wcs.byteLen(0)).isEqualTo(message.length);
            assertThat(wcs.qpNum(0)).isEqualTo(receiver.qpNum());
            assertThat(buffer.asSlice(4096, message.length).toArray(JAVA_BYTE)).isEqualTo(message);
            assertThat(pollOne(sendCq, wcs)).isEqualTo(1L);

            channel.setNonBlocking(true);
            assertThat(channel.getCqEvent()).as("no further event pending").isNull();

            receiver.modifyToError();
            assertThat(receiver.queryState()).isEqualTo(IbvQpState.ERR);
            receiver.modifyToReset();
            assertThat(receiver.queryState()).isEqualTo(IbvQpState.RESET);

            mr.close();
            receiver.close();
            sender.close();
            srq.close();
            recvCq.close();
            sendCq.close();
            channel.close();
            pd.close();
        }
    }

    private static void connect(QueuePair qp, int remoteQpNum, byte[] gid, int mtu) {
        qp.modifyToInit(PORT, IbvAccessFlags.REMOTE_WRITE | IbvAccessFlags.REMOTE_READ);
        assertThat(qp.queryState()).isEqualTo(IbvQpState.INIT);
        qp.modifyToRtr(new RtrAttributes(mtu, remoteQpNum, 0, 1, 12, PORT, 0, gid, 0));
        assertThat(qp.queryState()).isEqualTo(IbvQpState.RTR);
        qp.modifyToRts(0, 14, 7, 7, 1);
    }

    private static long pollOne(CompletionQueue cq, WorkCompletions wcs) {
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (cq.poll(wcs, 1) == 0) {
            assertThat(System.nanoTime()).as("completion within 10 s").isLessThan(deadline);
            Thread.onSpinWait();
        }
        assertThat(wcs.status(0)).as(wcs.toString(0)).isEqualTo(IbvWcStatus.SUCCESS);
        return wcs.wrId(0);
    }
}
