import { createTopupActivities, type TopupActivities } from '../src/jobs/topups';

/** The top-up order workflow's activities (workflows/topup.ts), implemented in the room (src/jobs/topups/). */
export { createTopupActivities, type TopupActivities };
