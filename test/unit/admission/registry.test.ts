import { MemoryAdmissionStore } from "../../support/stores/memory-admission-store";
import { describeExpiryRules } from "../../support/contracts/expiry-rules";
import { describeRegistryRules } from "../../support/contracts/registry-rules";

describeRegistryRules("the in-memory store", () => new MemoryAdmissionStore());
describeExpiryRules("the in-memory store", () => new MemoryAdmissionStore());
