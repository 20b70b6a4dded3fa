import { describe, expect, it } from "vitest";
import { PRICES, VPC_TOPOLOGY, between, priced, vpcIdleMonth, type Counts, type Dollars } from "../../../bench/cost";

const idleMonth: Dollars = { lambdaCompute: 20, lambdaRequests: 0.05, dynamoDb: 1, sqs: 1.25, eventBridge: 0, total: 22.3 };

function counts(seconds: number, sqsAppBytes?: number): Counts {
  return {
    seconds,
    lambda: { discover: { invocations: 3, gbSeconds: 1.5 } },
    dynamoDb: { writes: 10, reads: 100, other: 0 },
    sqsRequests: 50,
    scheduledInvocations: 3,
    ...(sqsAppBytes === undefined ? {} : { bytes: { dynamoDb: 2_000_000, sqsApp: sqsAppBytes } }),
  };
}

describe("bench:cost in a VPC", () => {
  it("adds every interface endpoint's hours in every AZ of every VPC, the gateway endpoint free, and the GB through them", () => {
    // Arrange: 2 VPCs x 2 AZs x (sqs, secretsmanager) = 8 endpoint-AZs for 720 hours.
    const hours = 8 * PRICES.interfaceEndpointPerAzHour * 720;

    // Act
    const vpc = vpcIdleMonth(idleMonth, 3);

    // Assert
    expect(vpc.topology).toEqual({ azs: 2, vpcs: 2, interface_endpoints: ["sqs", "secretsmanager"], gateway_endpoints: ["dynamodb"] });
    expect(vpc.endpointHours).toBeCloseTo(hours, 9);
    expect(vpc.endpointHours).toBeCloseTo(57.6, 9);
    expect(vpc.endpointData).toBeCloseTo(3 * PRICES.interfaceEndpointPerGb, 9);
    expect(vpc.endpointGbMeasured).toBe(true);
    expect(vpc.total).toBeCloseTo(idleMonth.total + hours + 0.03, 9);
    // The month's own figures are kept as they were.
    expect(vpc.lambdaCompute).toBe(idleMonth.lambdaCompute);
  });

  it("leaves the data term at 0 and says so when the counts hold no bytes", () => {
    const vpc = vpcIdleMonth(idleMonth, undefined);
    expect(vpc.endpointGbMeasured).toBe(false);
    expect(vpc.endpointData).toBe(0);
    expect(vpc.total).toBeCloseTo(idleMonth.total + vpc.endpointHours, 9);
  });

  it("prices one VPC with one endpoint in one AZ at an endpoint-hour a month", () => {
    const vpc = vpcIdleMonth(idleMonth, 0, { ...VPC_TOPOLOGY, azs: 1, vpcs: 1, interface_endpoints: ["sqs"] });
    expect(vpc.endpointHours).toBeCloseTo(PRICES.interfaceEndpointPerAzHour * 720, 9);
  });

  it("scales the idle window's SQS bytes to the month with the same factor as its requests", () => {
    // 3 idle minutes with 1 MB of the Apps' SQS traffic: 14,400 times that in 30 days, 14.4 GB.
    const figures = priced(counts(13), counts(180, 1_000_000), 200);
    expect(figures.dollars_per_idle_month_vpc.endpointGbPerMonth).toBeCloseTo(14.4, 9);
    expect(figures.dollars_per_idle_month_vpc.total).toBeCloseTo(figures.dollars_per_idle_month.total + 57.6 + 14.4 * PRICES.interfaceEndpointPerGb, 9);
    expect(priced(counts(13), counts(180), 200).dollars_per_idle_month_vpc.endpointGbMeasured).toBe(false);
  });

  it("keeps the bytes in the difference of two snapshots when both have them", () => {
    const window = between(counts(10, 1_000), counts(70, 5_000));
    expect(window.bytes).toEqual({ dynamoDb: 0, sqsApp: 4_000 });
    expect(between(counts(10), counts(70, 5_000)).bytes).toBeUndefined();
  });
});
