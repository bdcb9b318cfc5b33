package io.netty.contrib.channel.rdma.internal.verbs;

/**
 * An asynchronous event of a device ({@code struct ibv_async_event}), copied and acknowledged.
 *
 * @param eventType  {@code enum ibv_event_type}
 * @param element    the address of the CQ, QP or SRQ concerned, or the port number for port events
 */
public record AsyncEvent(int eventType, long element) {
}
