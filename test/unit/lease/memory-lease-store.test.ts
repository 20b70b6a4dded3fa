import { MemoryLeaseStore } from "../../support/stores/memory-lease-store";
import { describeLeaseStoreRules } from "../../support/contracts/lease-store-rules";

describeLeaseStoreRules("in memory", () => new MemoryLeaseStore());
